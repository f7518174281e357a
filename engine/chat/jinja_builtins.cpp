// Attribute and item access, operators and tests of the Jinja engine (see
// jinja_builtins.h); the filters are in jinja_filters.cpp, the methods of
// str, list and dict in jinja_methods.cpp.
#include "engine/chat/jinja_builtins.h"

#include <cmath>

#include "engine/chat/jinja_methods.h"

namespace ns::chat::jinja {

Value arg(const CallArgs& a, size_t k, const char* name) {
  for (const auto& kv : a.kw)
    if (kv.first == name) return kv.second;
  if (k < a.pos.size()) return a.pos[k];
  return Value();
}

namespace {

std::string type_repr(const Value& v) {
  if (v.is_none()) return "None";
  return v.type_name() + " object";
}

Value missing_attr(const Value& obj, const std::string& name) {
  return Value::undefined("'" + type_repr(obj) + "' has no attribute '" + name + "'");
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_namespace()) {
    const Value* v = obj.dict_data().find(Value(name));
    return v ? *v : missing_attr(obj, name);
  }
  if (Value m = bound_method(obj, name); m.is_function()) return m;
  if (obj.is_dict()) {
    const Value* v = obj.dict_data().find(Value(name));
    return v ? *v : missing_attr(obj, name);
  }
  return missing_attr(obj, name);
}

namespace {

// Python's index normalisation: negative counts from the end; false if out of range.
bool norm_index(int64_t& i, size_t n) {
  if (i < 0) i += static_cast<int64_t>(n);
  return i >= 0 && i < static_cast<int64_t>(n);
}

}  // namespace

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict() && !obj.is_namespace()) {
    if (const Value* v = obj.dict_data().find(key)) return *v;
  } else if (obj.is_list() && !obj.is_generator() && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (norm_index(i, obj.items().size())) return obj.items()[static_cast<size_t>(i)];
    return Value::undefined("'" + type_repr(obj) + "' has no element " + key.to_str());
  } else if (obj.is_string() && (key.is_int() || key.is_bool())) {
    auto chars = u8_chars(obj.str());
    int64_t i = key.as_int();
    if (norm_index(i, chars.size())) return Value(chars[static_cast<size_t>(i)]);
    return Value::undefined("'str object' has no element " + key.to_str());
  }
  if (key.is_string()) return get_attr(obj, key.str());
  return Value::undefined("'" + type_repr(obj) + "' has no element " + key.repr());
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  std::vector<std::string> chars;
  size_t n;
  if (obj.is_string()) {
    chars = u8_chars(obj.str());
    n = chars.size();
  } else if (obj.is_list() && !obj.is_generator()) {
    n = obj.items().size();
  } else {
    fail("TypeError: '" + obj.type_name() + "' object is not subscriptable");
  }
  auto as_i = [](const Value& v, const char* what) -> int64_t {
    if (!v.is_int() && !v.is_bool()) fail(std::string("TypeError: slice ") + what + " must be an integer or None");
    return v.as_int();
  };
  const int64_t len = static_cast<int64_t>(n);
  int64_t st = step.is_none() ? 1 : as_i(step, "step");
  if (st == 0) fail("ValueError: slice step cannot be zero");
  int64_t lo, hi;
  if (st > 0) {
    lo = start.is_none() ? 0 : as_i(start, "start");
    hi = stop.is_none() ? len : as_i(stop, "stop");
    if (lo < 0) lo = std::max<int64_t>(0, lo + len);
    if (hi < 0) hi = std::max<int64_t>(0, hi + len);
    lo = std::min(lo, len);
    hi = std::min(hi, len);
  } else {
    lo = start.is_none() ? len - 1 : as_i(start, "start");
    hi = stop.is_none() ? -1 : as_i(stop, "stop");
    if (!start.is_none() && lo < 0) lo = std::max<int64_t>(-1, lo + len);
    if (!stop.is_none() && hi < 0) hi = std::max<int64_t>(-1, hi + len);
    lo = std::min(lo, len - 1);
    hi = std::min(hi, len - 1);
  }
  std::vector<size_t> idx;
  for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) idx.push_back(static_cast<size_t>(i));
  if (obj.is_string()) {
    std::string out;
    for (size_t i : idx) out += chars[i];
    return Value(out);
  }
  std::vector<Value> out;
  for (size_t i : idx) out.push_back(obj.items()[i]);
  return Value::list(std::move(out), obj.is_tuple());
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined: return {};
    case Kind::list: return v.items();
    case Kind::dict: {
      std::vector<Value> keys;
      for (const auto& kv : v.dict_data().items) keys.push_back(kv.first);
      return keys;
    }
    case Kind::string: {
      std::vector<Value> out;
      for (auto& c : u8_chars(v.str())) out.emplace_back(c);
      return out;
    }
    default: fail("TypeError: '" + v.type_name() + "' object is not iterable");
  }
}

bool contains(const Value& c, const Value& item) {
  if (c.is_undefined()) return false;
  if (c.is_string()) {
    if (item.is_undefined()) fail_undefined(item);
    if (!item.is_string()) fail("TypeError: 'in <string>' requires string as left operand, not " + item.type_name());
    return c.str().find(item.str()) != std::string::npos;
  }
  if (c.is_dict()) return c.dict_data().find(item) != nullptr;
  if (c.is_list()) {
    for (const auto& x : c.items())
      if (py_equal(x, item)) return true;
    return false;
  }
  fail("TypeError: argument of type '" + c.type_name() + "' is not iterable");
}

namespace {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  fail("TypeError: unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

Value repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t k = 0; k < n; ++k) out += seq.str();
    return Value(out);
  }
  std::vector<Value> out;
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.is_tuple());
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(a.to_str() + b.to_str());
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool nums = a.is_number() && b.is_number();
  const bool any_float = a.is_float() || b.is_float();
  if (op == "+") {
    if (nums) return any_float ? Value(a.as_double() + b.as_double()) : Value(a.as_int() + b.as_int());
    if (a.is_string() && b.is_string()) {
      if (a.is_markup() || b.is_markup())
        return Value::markup((a.is_markup() ? a.str() : html_escape(a.str())) +
                             (b.is_markup() ? b.str() : html_escape(b.str())));
      return Value(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && !a.is_generator() && !b.is_generator() && a.is_tuple() == b.is_tuple()) {
      std::vector<Value> out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(out), a.is_tuple());
    }
    if (a.is_string()) fail("TypeError: can only concatenate str (not \"" + b.type_name() + "\") to str");
    bad_operands(op, a, b);
  }
  if (op == "*") {
    if (nums) return any_float ? Value(a.as_double() * b.as_double()) : Value(a.as_int() * b.as_int());
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
    bad_operands(op, a, b);
  }
  if (op == "%" && a.is_string()) return Value(percent_format(a.str(), b));
  if (!nums) bad_operands(op, a, b);
  if (op == "-") return any_float ? Value(a.as_double() - b.as_double()) : Value(a.as_int() - b.as_int());
  if (op == "/") {
    if (b.as_double() == 0) fail("ZeroDivisionError: division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (b.as_double() == 0) fail("ZeroDivisionError: integer division or modulo by zero");
    if (!any_float) {
      int64_t q = floor_div(a.as_int(), b.as_int());
      return op == "//" ? Value(q) : Value(a.as_int() - q * b.as_int());
    }
    double x = a.as_double(), y = b.as_double();
    double q = std::floor(x / y);
    if (op == "//") return Value(q);
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value(m);
  }
  if (op == "**") {
    if (!any_float && b.as_int() >= 0) {
      int64_t r = 1, base = a.as_int();
      for (int64_t e = b.as_int(); e > 0; --e) r *= base;
      return Value(r);
    }
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  fail("TemplateSyntaxError: unknown operator " + op);
}

bool apply_test(const std::string& name, const Value& v, CallArgs& a) {
  auto other = [&]() { return arg(a, 0, "value"); };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.is_namespace();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence") return (v.is_list() && !v.is_generator()) || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "callable") return v.is_function();
  if (name == "even" || name == "odd") {
    if (!v.is_int() && !v.is_bool()) fail("TypeError: even/odd needs an integer");
    int64_t r = v.as_int() % 2;
    return name == "even" ? r == 0 : r != 0;
  }
  if (name == "divisibleby") {
    Value d = other();
    if (d.as_int() == 0) fail("ZeroDivisionError: integer division or modulo by zero");
    return v.as_int() % d.as_int() == 0;
  }
  if (name == "equalto" || name == "eq" || name == "==") return py_equal(v, other());
  if (name == "ne" || name == "!=") return !py_equal(v, other());
  if (name == "lt" || name == "lessthan" || name == "<") return py_compare(v, other()) < 0;
  if (name == "le" || name == "<=") return py_compare(v, other()) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return py_compare(v, other()) > 0;
  if (name == "ge" || name == ">=") return py_compare(v, other()) >= 0;
  if (name == "in") return contains(other(), v);
  if (name == "sameas") {
    Value o = other();
    if (v.kind() != o.kind()) return false;
    if (v.is_list()) return &v.list_data() == &o.list_data();
    if (v.is_dict()) return &v.dict_data() == &o.dict_data();
    return py_equal(v, o);
  }
  if (name == "lower" || name == "upper") {
    const std::string s = v.to_str();
    bool any = false;
    for (char c : s) {
      if (std::isupper(static_cast<unsigned char>(c))) {
        if (name == "lower") return false;
        any = true;
      } else if (std::islower(static_cast<unsigned char>(c))) {
        if (name == "upper") return false;
        any = true;
      }
    }
    return any;
  }
  if (name == "escaped") return false;
  if (name == "filter") return has_filter(other().to_str());
  if (name == "test") return true;
  fail("TemplateRuntimeError: No test named '" + name + "'.");
}

}  // namespace ns::chat::jinja
