// Python semantics of the Jinja engine's values (see jinja_value.h).
#include "engine/chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace ns::chat::jinja {

void fail(const std::string& message) { throw ns::Error(ns::ErrorKind::invalid_input, message); }

void fail_undefined(const Value& v) {
  fail(v.str().empty() ? std::string("UndefinedError: value is undefined") : "UndefinedError: " + v.str());
}

const Value* DictData::find(const Value& key) const {
  for (const auto& kv : items)
    if (py_equal(kv.first, key)) return &kv.second;
  return nullptr;
}

Value* DictData::find(const Value& key) {
  for (auto& kv : items)
    if (py_equal(kv.first, key)) return &kv.second;
  return nullptr;
}

void DictData::set(const Value& key, Value v) {
  if (Value* slot = find(key)) {
    *slot = std::move(v);
    return;
  }
  items.emplace_back(key, std::move(v));
}

bool DictData::erase(const Value& key) {
  for (auto it = items.begin(); it != items.end(); ++it)
    if (py_equal(it->first, key)) {
      items.erase(it);
      return true;
    }
  return false;
}

Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::move(hint);
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::none;
  return v;
}

Value::Value(bool b) : kind_(Kind::boolean), b_(b) {}
Value::Value(int64_t v) : kind_(Kind::integer), i_(v) {}
Value::Value(double v) : kind_(Kind::floating), f_(v) {}
Value::Value(std::string s) : kind_(Kind::string), s_(std::move(s)) {}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&#34;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

Value Value::list(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind_ = Kind::list;
  v.list_ = std::make_shared<ListData>();
  v.list_->items = std::move(items);
  v.list_->tuple = tuple;
  return v;
}

Value Value::generator(std::vector<Value> items) {
  Value v = list(std::move(items));
  v.list_->generator = true;
  return v;
}

Value Value::dict() {
  Value v;
  v.kind_ = Kind::dict;
  v.dict_ = std::make_shared<DictData>();
  return v;
}

Value Value::ns_object() {
  Value v = dict();
  v.dict_->is_namespace = true;
  return v;
}

Value Value::function(Function f, std::string name) {
  Value v;
  v.kind_ = Kind::function;
  v.fn_ = std::make_shared<Function>(std::move(f));
  v.s_ = std::move(name);
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Value(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      for (const auto& e : j) items.push_back(from_json(e));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = dict();
      for (auto it = j.begin(); it != j.end(); ++it)
        d.dict_->items.emplace_back(Value(it.key()), from_json(it.value()));
      return d;
    }
    default: fail("TypeError: unsupported JSON value");
  }
}

double Value::as_double() const {
  if (kind_ == Kind::floating) return f_;
  if (kind_ == Kind::integer) return static_cast<double>(i_);
  if (kind_ == Kind::boolean) return b_ ? 1.0 : 0.0;
  fail("TypeError: a number is required, not " + type_name());
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return b_;
    case Kind::integer: return i_ != 0;
    case Kind::floating: return f_ != 0.0;
    case Kind::string: return !s_.empty();
    case Kind::list: return list_->generator || !list_->items.empty();
    case Kind::dict: return dict_->is_namespace || !dict_->items.empty();
    case Kind::function: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "str";
    case Kind::list: return list_->generator ? "generator" : list_->tuple ? "tuple" : "list";
    case Kind::dict: return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::function: return "function";
  }
  return "object";
}

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  // sci: [-]D[.DDD]e[+-]XX
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else {
      size_t ip = static_cast<size_t>(exp) + 1;
      if (digits.size() <= ip) {
        out += digits + std::string(ip - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, ip) + "." + digits.substr(ip);
      }
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char eb[16];
  std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return out + eb;
}

std::string py_str_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == static_cast<unsigned char>(q))
      out += std::string("\\") + q;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else
      out += static_cast<char>(c);
  }
  out += q;
  return out;
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::string: return py_str_repr(s_);
    case Kind::undefined: return "Undefined";
    default: break;
  }
  if (kind_ == Kind::list) {
    if (list_->generator) return "<generator object>";
    std::string out = list_->tuple ? "(" : "[";
    for (size_t k = 0; k < list_->items.size(); ++k) {
      if (k) out += ", ";
      out += list_->items[k].repr();
    }
    if (list_->tuple && list_->items.size() == 1) out += ",";
    return out + (list_->tuple ? ")" : "]");
  }
  if (kind_ == Kind::dict) {
    std::string out = dict_->is_namespace ? "<Namespace {" : "{";
    bool first = true;
    for (const auto& kv : dict_->items) {
      if (!first) out += ", ";
      first = false;
      out += kv.first.repr() + ": " + kv.second.repr();
    }
    return out + (dict_->is_namespace ? "}>" : "}");
  }
  return to_str();
}

std::string Value::to_str() const {
  switch (kind_) {
    case Kind::undefined: return "";
    case Kind::none: return "None";
    case Kind::boolean: return b_ ? "True" : "False";
    case Kind::integer: return std::to_string(i_);
    case Kind::floating: return py_float_repr(f_);
    case Kind::string: return s_;
    case Kind::function: return "<function " + s_ + ">";
    default: return repr();
  }
}

namespace {

int kind_rank(const Value& v) { return v.is_number() ? 0 : static_cast<int>(v.kind()) + 10; }

}  // namespace

bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (kind_rank(a) != kind_rank(b)) return false;
  switch (a.kind()) {
    case Kind::undefined:
    case Kind::none: return true;
    case Kind::string: return a.str() == b.str();
    case Kind::list: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t k = 0; k < x.size(); ++k)
        if (!py_equal(x[k], y[k])) return false;
      return true;
    }
    case Kind::dict: {
      const auto &x = a.dict_data(), &y = b.dict_data();
      if (&x == &y) return true;
      if (x.is_namespace || y.is_namespace) return false;
      if (x.items.size() != y.items.size()) return false;
      for (const auto& kv : x.items) {
        const Value* o = y.find(kv.first);
        if (!o || !py_equal(kv.second, *o)) return false;
      }
      return true;
    }
    case Kind::function: return &a.fn() == &b.fn();
    default: return false;
  }
}

int py_compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    int c = a.str().compare(b.str());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (py_equal(x[k], y[k])) continue;
      return py_compare(x[k], y[k]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  fail("TypeError: '<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

namespace {

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t k = 0; k < s.size(); ++k) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    char b[16];
    if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else if (c >= 0x80 && ensure_ascii) {
      uint32_t cp = 0;
      size_t n = (c >= 0xF0) ? 4 : (c >= 0xE0) ? 3 : (c >= 0xC0) ? 2 : 1;
      cp = n == 1 ? c : (c & (0xFF >> (n + 1)));
      for (size_t m = 1; m < n && k + m < s.size(); ++m) cp = (cp << 6) | (static_cast<unsigned char>(s[k + m]) & 0x3F);
      k += n - 1;
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        std::snprintf(b, sizeof b, "\\u%04x", cp);
      }
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

std::string json_key(const Value& k) {
  if (k.is_string()) return k.str();
  if (k.is_bool()) return k.as_bool() ? "true" : "false";
  if (k.is_none()) return "null";
  if (k.is_int()) return std::to_string(k.as_int());
  if (k.is_float()) return py_float_repr(k.as_double());
  fail("TypeError: keys must be str, int, float, bool or None, not " + k.type_name());
}

void json_dump(std::string& out, const Value& v, const JsonOptions& o, int depth) {
  if (depth > 200) fail("ValueError: Circular reference detected");
  const bool pretty = o.indent >= 0 || !o.indent_str.empty();
  auto newline = [&](int level) {
    out += '\n';
    for (int l = 0; l < level; ++l)
      out += o.indent_str.empty() ? std::string(static_cast<size_t>(o.indent), ' ') : o.indent_str;
  };
  const std::string item_sep = o.has_separators ? o.item_sep : (pretty ? "," : ", ");
  const std::string key_sep = o.has_separators ? o.key_sep : ": ";
  switch (v.kind()) {
    case Kind::none: out += "null"; return;
    case Kind::boolean: out += v.as_bool() ? "true" : "false"; return;
    case Kind::integer: out += std::to_string(v.as_int()); return;
    case Kind::floating: {
      double d = v.as_double();
      if (std::isnan(d))
        out += "NaN";
      else if (std::isinf(d))
        out += d < 0 ? "-Infinity" : "Infinity";
      else
        out += py_float_repr(d);
      return;
    }
    case Kind::string: json_string(out, v.str(), o.ensure_ascii); return;
    case Kind::list: {
      if (v.is_generator()) fail("TypeError: Object of type generator is not JSON serializable");
      const auto& items = v.items();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += item_sep;
        if (pretty) newline(depth + 1);
        json_dump(out, items[k], o, depth + 1);
      }
      if (pretty) newline(depth);
      out += ']';
      return;
    }
    case Kind::dict: {
      if (v.is_namespace()) fail("TypeError: Object of type Namespace is not JSON serializable");
      std::vector<std::pair<std::string, const Value*>> kvs;
      for (const auto& kv : v.dict_data().items) kvs.emplace_back(json_key(kv.first), &kv.second);
      if (o.sort_keys)
        std::stable_sort(kvs.begin(), kvs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      if (kvs.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t k = 0; k < kvs.size(); ++k) {
        if (k) out += item_sep;
        if (pretty) newline(depth + 1);
        json_string(out, kvs[k].first, o.ensure_ascii);
        out += key_sep;
        json_dump(out, *kvs[k].second, o, depth + 1);
      }
      if (pretty) newline(depth);
      out += '}';
      return;
    }
    case Kind::undefined: fail("TypeError: Object of type Undefined is not JSON serializable");
    case Kind::function: fail("TypeError: Object of type function is not JSON serializable");
  }
}

}  // namespace

std::string py_json_dumps(const Value& v, const JsonOptions& o) {
  std::string out;
  json_dump(out, v, o, 0);
  return out;
}

size_t u8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

std::vector<std::string> u8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t k = 0; k < s.size();) {
    size_t n = 1;
    while (k + n < s.size() && (static_cast<unsigned char>(s[k + n]) & 0xC0) == 0x80) ++n;
    out.push_back(s.substr(k, n));
    k += n;
  }
  return out;
}

}  // namespace ns::chat::jinja
