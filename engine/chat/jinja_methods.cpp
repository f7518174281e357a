// Methods of str, list and dict (see jinja_methods.h).
#include "engine/chat/jinja_methods.h"

#include <algorithm>
#include <cstdio>

#include "engine/chat/jinja_builtins.h"
#include "common/utf8.h"

namespace ns::chat::jinja {

namespace {

bool is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

const std::string& want_str(const Value& v, const char* method) {
  if (!v.is_string()) fail(std::string("TypeError: ") + method + "() argument must be str, not " + v.type_name());
  return v.str();
}

std::vector<Value> split_ws(const std::string& s, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_ws(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = s.size();
        while (e > i && is_ws(static_cast<unsigned char>(s[e - 1]))) --e;
        parts.push_back(s.substr(i, e - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_ws(static_cast<unsigned char>(s[j]))) ++j;
      parts.push_back(s.substr(i, j - i));
      i = j;
    }
  } else {
    size_t e = s.size();
    while (true) {
      while (e > 0 && is_ws(static_cast<unsigned char>(s[e - 1]))) --e;
      if (e == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t b = 0;
        while (b < e && is_ws(static_cast<unsigned char>(s[b]))) ++b;
        parts.push_back(s.substr(b, e - b));
        break;
      }
      size_t b = e;
      while (b > 0 && !is_ws(static_cast<unsigned char>(s[b - 1]))) --b;
      parts.push_back(s.substr(b, e - b));
      e = b;
    }
    std::reverse(parts.begin(), parts.end());
  }
  std::vector<Value> out;
  for (auto& p : parts) out.emplace_back(p);
  return out;
}

std::vector<Value> split_sep(const std::string& s, const std::string& sep, int64_t maxsplit, bool from_right) {
  if (sep.empty()) fail("ValueError: empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t i = 0;
    while (true) {
      size_t j = (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) ? std::string::npos : s.find(sep, i);
      if (j == std::string::npos) {
        parts.push_back(s.substr(i));
        break;
      }
      parts.push_back(s.substr(i, j - i));
      i = j + sep.size();
    }
  } else {
    size_t e = s.size();
    while (true) {
      size_t j = (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) || e < sep.size()
                     ? std::string::npos
                     : s.rfind(sep, e - sep.size());
      if (j == std::string::npos) {
        parts.push_back(s.substr(0, e));
        break;
      }
      parts.push_back(s.substr(j + sep.size(), e - j - sep.size()));
      e = j;
    }
    std::reverse(parts.begin(), parts.end());
  }
  std::vector<Value> out;
  for (auto& p : parts) out.emplace_back(p);
  return out;
}

int64_t int_arg(const Value& v, int64_t def) { return v.is_undefined() || v.is_none() ? def : v.as_int(); }

bool starts_or_ends(const std::string& s, const Value& what, bool start) {
  auto one = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return start ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (what.is_list()) {
    for (const auto& x : what.items())
      if (one(want_str(x, start ? "startswith" : "endswith"))) return true;
    return false;
  }
  return one(want_str(what, start ? "startswith" : "endswith"));
}

// Byte offset of code point index i (clamped).
size_t cp_offset(const std::string& s, int64_t i) {
  auto n = static_cast<int64_t>(u8_length(s));
  if (i < 0) i = std::max<int64_t>(0, i + n);
  size_t off = 0;
  for (int64_t k = 0; k < i && off < s.size(); ++k) {
    ++off;
    while (off < s.size() && (static_cast<unsigned char>(s[off]) & 0xC0) == 0x80) ++off;
  }
  return off;
}

Value str_method(const Value& self, const std::string& name, CallArgs& a) {
  const std::string& s = self.str();
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return Value(py_strip(s, arg(a, 0, "chars"), name != "rstrip", name != "lstrip"));
  if (name == "upper") return Value(py_upper(s));
  if (name == "lower") return Value(py_lower(s));
  if (name == "title") return Value(py_title(s));
  if (name == "capitalize") return Value(py_capitalize(s));
  if (name == "startswith" || name == "endswith")
    return Value(starts_or_ends(s, arg(a, 0, "prefix"), name == "startswith"));
  if (name == "split" || name == "rsplit") {
    Value sep = arg(a, 0, "sep");
    int64_t maxsplit = int_arg(arg(a, 1, "maxsplit"), -1);
    bool right = name == "rsplit";
    return Value::list(sep.is_undefined() || sep.is_none()
                           ? split_ws(s, maxsplit, right)
                           : split_sep(s, want_str(sep, name.c_str()), maxsplit, right));
  }
  if (name == "splitlines") {
    std::vector<Value> out;
    size_t i = 0;
    while (i < s.size()) {
      size_t j = s.find_first_of("\r\n", i);
      if (j == std::string::npos) {
        out.emplace_back(s.substr(i));
        break;
      }
      out.emplace_back(s.substr(i, j - i));
      i = j + ((s[j] == '\r' && j + 1 < s.size() && s[j + 1] == '\n') ? 2 : 1);
    }
    return Value::list(std::move(out));
  }
  if (name == "replace")
    return Value(py_replace(s, want_str(arg(a, 0, "old"), "replace"), want_str(arg(a, 1, "new"), "replace"),
                            int_arg(arg(a, 2, "count"), -1)));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const std::string sub = want_str(arg(a, 0, "sub"), name.c_str());
    size_t lo = cp_offset(s, int_arg(arg(a, 1, "start"), 0));
    size_t hi = a.pos.size() > 2 ? cp_offset(s, a.pos[2].as_int()) : s.size();
    std::string region = lo <= hi ? s.substr(lo, hi - lo) : std::string();
    size_t r = name[0] == 'r' ? region.rfind(sub) : region.find(sub);
    if (r == std::string::npos) {
      if (name == "index" || name == "rindex") fail("ValueError: substring not found");
      return Value(int64_t{-1});
    }
    return Value(static_cast<int64_t>(u8_length(s.substr(0, lo + r))));
  }
  if (name == "count") {
    const std::string sub = want_str(arg(a, 0, "sub"), "count");
    if (sub.empty()) return Value(static_cast<int64_t>(u8_length(s) + 1));
    int64_t n = 0;
    for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
    return Value(n);
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const auto& x : iterate(arg(a, 0, "iterable"))) {
      if (!first) out += s;
      first = false;
      out += want_str(x, "join");
    }
    return Value(out);
  }
  if (name == "format") return Value(str_format(s, a));
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "isupper" ||
      name == "islower") {
    if (s.empty()) return Value(false);
    bool cased = false;
    for (unsigned char c : s) {
      if (name == "isdigit" && !std::isdigit(c)) return Value(false);
      if (name == "isalpha" && !std::isalpha(c) && c < 0x80) return Value(false);
      if (name == "isalnum" && !std::isalnum(c) && c < 0x80) return Value(false);
      if (name == "isspace" && !is_ws(c)) return Value(false);
      if (name == "isupper" && std::islower(c)) return Value(false);
      if (name == "islower" && std::isupper(c)) return Value(false);
      cased = cased || std::isalpha(c);
    }
    return Value(name == "isupper" || name == "islower" ? cased : true);
  }
  fail("AttributeError: 'str' object has no attribute '" + name + "'");
}

Value list_method(const Value& self, const std::string& name, CallArgs& a) {
  auto& items = self.items();
  if (name == "append") {
    items.push_back(arg(a, 0, "object"));
    return Value::none();
  }
  if (name == "extend") {
    for (auto& x : iterate(arg(a, 0, "iterable"))) items.push_back(x);
    return Value::none();
  }
  if (name == "insert") {
    int64_t i = arg(a, 0, "index").as_int(), n = static_cast<int64_t>(items.size());
    if (i < 0) i = std::max<int64_t>(0, i + n);
    i = std::min(i, n);
    items.insert(items.begin() + i, arg(a, 1, "object"));
    return Value::none();
  }
  if (name == "pop") {
    if (items.empty()) fail("IndexError: pop from empty list");
    int64_t i = int_arg(arg(a, 0, "index"), -1), n = static_cast<int64_t>(items.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) fail("IndexError: pop index out of range");
    Value v = items[static_cast<size_t>(i)];
    items.erase(items.begin() + i);
    return v;
  }
  if (name == "index" || name == "count" || name == "remove") {
    Value x = arg(a, 0, "value");
    int64_t count = 0;
    for (size_t k = 0; k < items.size(); ++k) {
      if (!py_equal(items[k], x)) continue;
      if (name == "index") return Value(static_cast<int64_t>(k));
      if (name == "remove") {
        items.erase(items.begin() + static_cast<int64_t>(k));
        return Value::none();
      }
      ++count;
    }
    if (name == "count") return Value(count);
    fail("ValueError: " + x.repr() + " is not in list");
  }
  if (name == "reverse") {
    std::reverse(items.begin(), items.end());
    return Value::none();
  }
  if (name == "copy") return Value::list(items, self.is_tuple());
  fail("AttributeError: 'list' object has no attribute '" + name + "'");
}

Value dict_method(const Value& self, const std::string& name, CallArgs& a) {
  auto& d = self.dict_data();
  if (name == "items" || name == "keys" || name == "values") {
    std::vector<Value> out;
    for (const auto& kv : d.items)
      out.push_back(name == "items" ? Value::list({kv.first, kv.second}, true) : name == "keys" ? kv.first : kv.second);
    return Value::list(std::move(out));
  }
  if (name == "get") {
    const Value* v = d.find(arg(a, 0, "key"));
    if (v) return *v;
    Value def = arg(a, 1, "default");
    return def.is_undefined() ? Value::none() : def;
  }
  if (name == "update") {
    for (const auto& p : a.pos) {
      if (!p.is_dict()) fail("TypeError: update() needs a mapping");
      for (const auto& kv : p.dict_data().items) d.set(kv.first, kv.second);
    }
    for (const auto& kv : a.kw) d.set(Value(kv.first), kv.second);
    return Value::none();
  }
  if (name == "pop") {
    Value key = arg(a, 0, "key");
    if (const Value* v = d.find(key)) {
      Value out = *v;
      d.erase(key);
      return out;
    }
    if (a.pos.size() > 1) return a.pos[1];
    fail("KeyError: " + key.repr());
  }
  if (name == "setdefault") {
    Value key = arg(a, 0, "key");
    if (const Value* v = d.find(key)) return *v;
    Value def = a.pos.size() > 1 ? a.pos[1] : Value::none();
    d.set(key, def);
    return def;
  }
  if (name == "copy") {
    Value c = Value::dict();
    c.dict_data().items = d.items;
    return c;
  }
  fail("AttributeError: 'dict' object has no attribute '" + name + "'");
}

const char* const kStrMethods[] = {
    "strip", "lstrip", "rstrip",     "upper",   "lower",   "title",   "capitalize", "startswith", "endswith",
    "split", "rsplit", "splitlines", "replace", "find",    "rfind",   "index",      "rindex",     "count",
    "join",  "format", "isdigit",    "isalpha", "isalnum", "isspace", "isupper",    "islower"};
const char* const kListMethods[] = {"append", "extend", "insert", "pop", "index", "count", "remove", "reverse", "copy"};
const char* const kDictMethods[] = {"items", "keys", "values", "get", "update", "pop", "setdefault", "copy"};

template <size_t N>
bool listed(const char* const (&names)[N], const std::string& n) {
  for (const char* x : names)
    if (n == x) return true;
  return false;
}

}  // namespace

Value bound_method(const Value& obj, const std::string& name) {
  Value (*impl)(const Value&, const std::string&, CallArgs&) = nullptr;
  if (obj.is_string() && listed(kStrMethods, name))
    impl = str_method;
  else if (obj.is_list() && !obj.is_generator() && listed(kListMethods, name))
    impl = list_method;
  else if (obj.is_dict() && !obj.is_namespace() && listed(kDictMethods, name))
    impl = dict_method;
  if (!impl) return Value();
  return Value::function([obj, name, impl](CallArgs& a) { return impl(obj, name, a); }, name);
}

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  auto cs = u8_chars(s);
  std::vector<std::string> set;
  bool ws = chars.is_undefined() || chars.is_none();
  if (!ws) set = u8_chars(want_str(chars, "strip"));
  auto strip_me = [&](const std::string& c) {
    if (ws) return c.size() == 1 && is_ws(static_cast<unsigned char>(c[0]));
    return std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0, e = cs.size();
  if (left)
    while (b < e && strip_me(cs[b])) ++b;
  if (right)
    while (e > b && strip_me(cs[e - 1])) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) out += cs[k];
  return out;
}

namespace {

// Simple case mapping for the scripts chat text commonly holds: ASCII, Latin-1,
// Latin Extended-A, Greek and Cyrillic (Python maps every cased letter; others
// are left as they are here).
// Latin Extended-A: letter pairs, the capital at the even code point except
// in U+0139..U+0148 and U+0179..U+017E; a few letters have no pair here.
bool latin_a_pair(uint32_t c) {
  return c >= 0x100 && c <= 0x17E && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x178;
}
bool latin_a_upper_even(uint32_t c) { return c <= 0x137 || (c >= 0x14A && c <= 0x177); }

uint32_t to_upper_cp(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 0x20;
  if (c == 0xFF) return 0x178;
  if (latin_a_pair(c) && (latin_a_upper_even(c) ? c % 2 == 1 : c % 2 == 0)) return c - 1;
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 0x20;
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x430 && c <= 0x44F) return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  return c;
}

uint32_t to_lower_cp(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c == 0x178) return 0xFF;
  if (latin_a_pair(c) && (latin_a_upper_even(c) ? c % 2 == 0 : c % 2 == 1)) return c + 1;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

bool is_cased_cp(uint32_t c) { return to_upper_cp(c) != c || to_lower_cp(c) != c; }

// Code points of UTF-8 text (invalid bytes pass through as themselves).
std::vector<uint32_t> decode_cps(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t k = 0; k < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (k + n > s.size()) n = 1;
    uint32_t cp = n == 1 ? c : (c & (0xFF >> (n + 1)));
    for (size_t m = 1; m < n; ++m) cp = (cp << 6) | (static_cast<unsigned char>(s[k + m]) & 0x3F);
    out.push_back(cp);
    k += n;
  }
  return out;
}

std::string encode_cps(const std::vector<uint32_t>& cps) {
  std::string o;
  for (uint32_t cp : cps) o += encode_utf8(cp);
  return o;
}

}  // namespace

std::string py_upper(const std::string& s) {
  std::vector<uint32_t> out;
  for (uint32_t c : decode_cps(s)) {
    if (c == 0xDF) {  // ß -> SS
      out.push_back('S');
      out.push_back('S');
    } else {
      out.push_back(to_upper_cp(c));
    }
  }
  return encode_cps(out);
}

std::string py_lower(const std::string& s) {
  auto cps = decode_cps(s);
  for (auto& c : cps) c = to_lower_cp(c);
  return encode_cps(cps);
}

std::string py_capitalize(const std::string& s) {
  auto cps = decode_cps(py_lower(s));
  if (!cps.empty()) cps[0] = to_upper_cp(cps[0]);
  return encode_cps(cps);
}

std::string py_title(const std::string& s) {
  auto cps = decode_cps(s);
  bool prev_cased = false;
  for (auto& c : cps) {
    if (is_cased_cp(c)) {
      c = prev_cased ? to_lower_cp(c) : to_upper_cp(c);
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return encode_cps(cps);
}

std::string jinja_title(const std::string& s) {
  auto cps = decode_cps(s);
  bool start = true;
  for (auto& c : cps) {
    bool sep = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '-' || c == '(' ||
               c == '{' || c == '[' || c == '<';
    if (!sep) c = start ? to_upper_cp(c) : to_lower_cp(c);
    start = sep;
  }
  return encode_cps(cps);
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {
    auto cs = u8_chars(s);
    int64_t n = 0;
    for (const auto& c : cs) {
      if (count < 0 || n < count) out += to, ++n;
      out += c;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  size_t i = 0;
  int64_t n = 0;
  while (true) {
    size_t j = (count >= 0 && n >= count) ? std::string::npos : s.find(from, i);
    if (j == std::string::npos) break;
    out += s.substr(i, j - i) + to;
    i = j + from.size();
    ++n;
  }
  return out + s.substr(i);
}

std::string percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> vals = args.is_tuple() ? args.items() : std::vector<Value>{args};
  std::string out;
  size_t vi = 0;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out += fmt[k];
      continue;
    }
    if (++k >= fmt.size()) fail("ValueError: incomplete format");
    std::string spec;
    while (k < fmt.size() && std::strchr("-+ #0123456789.", fmt[k])) spec += fmt[k++];
    char conv = fmt[k];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (vi >= vals.size()) fail("TypeError: not enough arguments for format string");
    const Value& v = vals[vi++];
    char buf[128];
    if (conv == 's')
      out += v.to_str();
    else if (conv == 'r')
      out += v.repr();
    else if (conv == 'd' || conv == 'i') {
      std::snprintf(buf, sizeof buf, ("%" + spec + "lld").c_str(), static_cast<long long>(v.as_int()));
      out += buf;
    } else if (conv == 'f' || conv == 'g' || conv == 'e') {
      std::snprintf(buf, sizeof buf, ("%" + spec + conv).c_str(), v.as_double());
      out += buf;
    } else {
      fail(std::string("ValueError: unsupported format character '") + conv + "'");
    }
  }
  if (vi < vals.size() && args.is_tuple()) fail("TypeError: not all arguments converted during string formatting");
  return out;
}

std::string str_format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t k = 0; k < fmt.size(); ++k) {
    char c = fmt[k];
    if (c == '}' && k + 1 < fmt.size() && fmt[k + 1] == '}') {
      out += '}';
      ++k;
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out += '{';
      ++k;
      continue;
    }
    size_t e = fmt.find('}', k);
    if (e == std::string::npos) fail("ValueError: Single '{' encountered in format string");
    std::string field = fmt.substr(k + 1, e - k - 1);
    std::string spec;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    Value v;
    if (field.empty()) {
      if (auto_index >= a.pos.size()) fail("IndexError: Replacement index out of range for positional args tuple");
      v = a.pos[auto_index++];
    } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t i = std::stoul(field);
      if (i >= a.pos.size()) fail("IndexError: Replacement index out of range for positional args tuple");
      v = a.pos[i];
    } else {
      bool found = false;
      for (const auto& kv : a.kw)
        if (kv.first == field) v = kv.second, found = true;
      if (!found) fail("KeyError: '" + field + "'");
    }
    if (!spec.empty()) fail("ValueError: format specs are not supported: '" + spec + "'");
    out += v.to_str();
    k = e;
  }
  return out;
}

}  // namespace ns::chat::jinja
