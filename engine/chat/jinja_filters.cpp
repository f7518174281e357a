// The Jinja filters, as jinja2 3.1 defines them (tojson as transformers
// defines it: json.dumps with ensure_ascii=False).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/chat/jinja_builtins.h"
#include "engine/chat/jinja_methods.h"

namespace ns::chat::jinja {

namespace {

bool flag(const Value& v, bool def) { return v.is_undefined() ? def : v.truthy(); }

// jinja2's attribute getter for selectattr, map, sort...: "a.b" and "0" parts, item first.
Value attr_path(const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return get_item(item, attribute);
  Value v = item;
  const std::string& path = attribute.str();
  size_t b = 0;
  while (true) {
    size_t e = path.find('.', b);
    std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(c); });
    if (v.is_undefined()) return v;
    v = digits ? get_item(v, Value(static_cast<int64_t>(std::stoll(part)))) : get_item(v, Value(part));
    if (e == std::string::npos) return v;
    b = e + 1;
  }
}

Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.str()));
  return v;
}

size_t py_len(const Value& v) {
  if (v.is_undefined()) return 0;
  if (v.is_string()) return u8_length(v.str());
  if (v.is_list() && !v.is_generator()) return v.items().size();
  if (v.is_dict()) return v.dict_data().items.size();
  fail("TypeError: object of type '" + v.type_name() + "' has no len()");
}

CallArgs rest_args(const CallArgs& a, size_t from) {
  CallArgs r;
  for (size_t k = from; k < a.pos.size(); ++k) r.pos.push_back(a.pos[k]);
  r.kw = a.kw;
  return r;
}

// jinja2's select/map iterate their input only when it is true (None gives nothing).
std::vector<Value> iterate_if_true(const Value& seq) { return seq.truthy() ? iterate(seq) : std::vector<Value>{}; }

Value select_like(const Value& seq, CallArgs& a, bool by_attr, bool keep) {
  Value attribute = by_attr ? arg(a, 0, "attribute") : Value();
  const size_t test_at = by_attr ? 1 : 0;
  std::string test = a.pos.size() > test_at ? a.pos[test_at].to_str() : std::string();
  CallArgs targs = rest_args(a, test_at + 1);
  targs.kw.clear();
  std::vector<Value> out;
  for (const Value& item : iterate_if_true(seq)) {
    Value v = by_attr ? attr_path(item, attribute) : item;
    bool ok = test.empty() ? v.truthy() : apply_test(test, v, targs);
    if (ok == keep) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value do_map(const Value& seq, CallArgs& a) {
  std::vector<Value> out;
  Value attribute = arg(a, 99, "attribute");
  if (!attribute.is_undefined()) {
    Value def = arg(a, 99, "default");
    for (const Value& item : iterate_if_true(seq)) {
      Value v = attr_path(item, attribute);
      out.push_back(v.is_undefined() && !def.is_undefined() ? def : v);
    }
    return Value::generator(std::move(out));
  }
  if (a.pos.empty()) return Value::generator(iterate_if_true(seq));
  std::string name = a.pos[0].to_str();
  CallArgs fargs = rest_args(a, 1);
  for (const Value& item : iterate_if_true(seq)) {
    CallArgs copy = fargs;
    out.push_back(apply_filter(name, item, copy));
  }
  return Value::generator(std::move(out));
}

Value do_sort(const Value& seq, CallArgs& a, bool dictsort) {
  std::vector<Value> items;
  bool reverse = flag(arg(a, dictsort ? 2 : 0, "reverse"), false);
  bool cs = flag(arg(a, dictsort ? 0 : 1, "case_sensitive"), false);
  Value attribute = dictsort ? Value() : arg(a, 2, "attribute");
  size_t key_index = 0;
  if (dictsort) {
    if (!seq.is_dict()) fail("TypeError: dictsort needs a mapping");
    for (const auto& kv : seq.dict_data().items) items.push_back(Value::list({kv.first, kv.second}, true));
    Value by = arg(a, 1, "by");
    if (!by.is_undefined()) {
      if (by.to_str() == "value")
        key_index = 1;
      else if (by.to_str() != "key")
        fail("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
    }
  } else {
    items = iterate(seq);
  }
  auto key = [&](const Value& v) {
    if (dictsort) return sort_key(v.items()[key_index], cs);
    return sort_key(attribute.is_undefined() ? v : attr_path(v, attribute), cs);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    int c = py_compare(key(x), key(y));
    return reverse ? c > 0 : c < 0;
  });
  return Value::list(std::move(items));
}

Value do_tojson(const Value& v, CallArgs& a) {
  JsonOptions o;
  o.ensure_ascii = flag(arg(a, 99, "ensure_ascii"), false);
  o.sort_keys = flag(arg(a, 99, "sort_keys"), false);
  Value indent = arg(a, 0, "indent");
  if (indent.is_int())
    o.indent = static_cast<int>(indent.as_int());
  else if (indent.is_string())
    o.indent_str = indent.str(), o.indent = 0;
  Value seps = arg(a, 99, "separators");
  if (seps.is_list() && seps.items().size() == 2) {
    o.has_separators = true;
    o.item_sep = seps.items()[0].to_str();
    o.key_sep = seps.items()[1].to_str();
  }
  return Value(py_json_dumps(v, o));
}

Value do_indent(const Value& v, CallArgs& a) {
  Value w = arg(a, 0, "width");
  std::string ind = w.is_string() ? w.str() : std::string(static_cast<size_t>(w.is_undefined() ? 4 : w.as_int()), ' ');
  bool first = flag(arg(a, 1, "first"), false), blank = flag(arg(a, 2, "blank"), false);
  std::string s = v.to_str() + "\n";
  std::vector<std::string> lines;
  for (size_t i = 0; i < s.size();) {
    size_t j = s.find_first_of("\r\n", i);
    lines.push_back(s.substr(i, j - i));
    i = j + ((s[j] == '\r' && j + 1 < s.size() && s[j + 1] == '\n') ? 2 : 1);
  }
  std::string rv;
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k) rv += "\n";
    if (k && (blank || !lines[k].empty())) rv += ind;
    rv += lines[k];
  }
  return Value(first ? ind + rv : rv);
}

Value do_round(const Value& v, CallArgs& a) {
  int64_t precision = arg(a, 0, "precision").is_undefined() ? 0 : arg(a, 0, "precision").as_int();
  std::string method = arg(a, 1, "method").is_undefined() ? "common" : arg(a, 1, "method").to_str();
  if (v.is_int() || v.is_bool()) return method == "common" ? Value(v.as_int()) : Value(v.as_double());
  double x = v.as_double(), p = std::pow(10.0, static_cast<double>(precision));
  if (method == "floor") return Value(std::floor(x * p) / p);
  if (method == "ceil") return Value(std::ceil(x * p) / p);
  if (method != "common") fail("FilterArgumentError: method must be common, ceil or floor");
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::max<int64_t>(0, precision)), x);
  return Value(std::strtod(buf, nullptr));
}

Value do_int(const Value& v, CallArgs& a) {
  Value def = arg(a, 0, "default");
  Value fallback = def.is_undefined() ? Value(int64_t{0}) : def;
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) return Value(static_cast<int64_t>(v.as_double()));
  if (v.is_string()) {
    std::string s = py_strip(v.str(), Value(), true, true);
    try {
      size_t n = 0;
      long long r = std::stoll(s, &n, 10);
      if (n == s.size()) return Value(static_cast<int64_t>(r));
      double d = std::stod(s, &n);
      if (n == s.size()) return Value(static_cast<int64_t>(d));
    } catch (const std::exception&) {
    }
  }
  return fallback;
}

Value do_float(const Value& v, CallArgs& a) {
  Value def = arg(a, 0, "default");
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    try {
      size_t n = 0;
      std::string s = py_strip(v.str(), Value(), true, true);
      double d = std::stod(s, &n);
      if (n == s.size()) return Value(d);
    } catch (const std::exception&) {
    }
  }
  return def.is_undefined() ? Value(0.0) : def;
}

Value min_max(const Value& seq, CallArgs& a, bool want_max) {
  bool cs = flag(arg(a, 0, "case_sensitive"), false);
  Value attribute = arg(a, 1, "attribute");
  Value best;
  for (const Value& x : iterate(seq)) {
    Value k = sort_key(attribute.is_undefined() ? x : attr_path(x, attribute), cs);
    if (best.is_undefined()) {
      best = x;
      continue;
    }
    Value bk = sort_key(attribute.is_undefined() ? best : attr_path(best, attribute), cs);
    int c = py_compare(k, bk);
    if (want_max ? c > 0 : c < 0) best = x;
  }
  return best.is_undefined() ? Value::undefined("No aggregated item, sequence was empty.") : best;
}

const char* const kFilters[] = {
    "tojson",    "trim",       "length",     "count",   "items",   "first",       "last",   "join",  "upper",
    "lower",     "title",      "capitalize", "replace", "default", "d",           "string", "int",   "float",
    "list",      "selectattr", "rejectattr", "select",  "reject",  "map",         "unique", "sort",  "reverse",
    "dictsort",  "indent",     "safe",       "escape",  "e",       "forceescape", "abs",    "round", "batch",
    "wordcount", "center",     "min",        "max",     "sum",     "attr",        "format", "bool",  "pprint"};

}  // namespace

bool has_filter(const std::string& name) {
  for (const char* f : kFilters)
    if (name == f) return true;
  return false;
}

Value apply_filter(const std::string& name, const Value& v, CallArgs& a) {
  if (name == "default" || name == "d") {
    bool boolean = flag(arg(a, 1, "boolean"), false);
    if (v.is_undefined() || (boolean && !v.truthy())) {
      Value def = arg(a, 0, "default_value");
      return def.is_undefined() ? Value(std::string()) : def;
    }
    return v;
  }
  if (name == "tojson") return do_tojson(v, a);
  if (name == "safe") return v.is_markup() ? v : Value::markup(v.to_str());
  if (name == "string") return v.is_string() ? v : Value(v.to_str());
  if (name == "length" || name == "count") return Value(static_cast<int64_t>(py_len(v)));
  if (name == "trim") return Value(py_strip(v.to_str(), arg(a, 0, "chars"), true, true));
  if (name == "upper") return Value(py_upper(v.to_str()));
  if (name == "lower") return Value(py_lower(v.to_str()));
  if (name == "capitalize") return Value(py_capitalize(v.to_str()));
  if (name == "title") return Value(jinja_title(v.to_str()));
  if (name == "replace") {
    Value count = arg(a, 2, "count");
    return Value(py_replace(v.to_str(), arg(a, 0, "old").to_str(), arg(a, 1, "new").to_str(),
                            count.is_undefined() || count.is_none() ? -1 : count.as_int()));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::generator({});
    if (!v.is_dict()) fail("TypeError: Can only get item pairs from a mapping.");
    std::vector<Value> out;
    for (const auto& kv : v.dict_data().items) out.push_back(Value::list({kv.first, kv.second}, true));
    return Value::generator(std::move(out));
  }
  if (name == "list") return Value::list(iterate(v));
  if (name == "first") {
    auto items = iterate(v);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  }
  if (name == "last") {
    if (v.is_generator()) fail("TypeError: 'generator' object is not reversible");
    auto items = iterate(v);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  }
  if (name == "join") {
    std::string sep = arg(a, 0, "d").is_undefined() ? std::string() : arg(a, 0, "d").to_str();
    Value attribute = arg(a, 1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& x : iterate(v)) {
      if (!first) out += sep;
      first = false;
      out += (attribute.is_undefined() ? x : attr_path(x, attribute)).to_str();
    }
    return Value(out);
  }
  if (name == "selectattr" || name == "rejectattr") return select_like(v, a, true, name == "selectattr");
  if (name == "select" || name == "reject") return select_like(v, a, false, name == "select");
  if (name == "map") return do_map(v, a);
  if (name == "sort") return do_sort(v, a, false);
  if (name == "dictsort") return do_sort(v, a, true);
  if (name == "unique") {
    bool cs = flag(arg(a, 0, "case_sensitive"), false);
    Value attribute = arg(a, 1, "attribute");
    std::vector<Value> out, seen;
    for (const Value& x : iterate(v)) {
      Value k = sort_key(attribute.is_undefined() ? x : attr_path(x, attribute), cs);
      bool dup = false;
      for (const auto& s : seen) dup = dup || py_equal(s, k);
      if (dup) continue;
      seen.push_back(k);
      out.push_back(x);
    }
    return Value::generator(std::move(out));
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto cs = u8_chars(v.str());
      std::string o;
      for (size_t k = cs.size(); k-- > 0;) o += cs[k];
      return Value(o);
    }
    auto items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::generator(std::move(items));
  }
  if (name == "indent") return do_indent(v, a);
  if (name == "escape" || name == "e") return v.is_markup() ? v : Value::markup(html_escape(v.to_str()));
  if (name == "forceescape") return Value::markup(html_escape(v.to_str()));
  if (name == "abs") {
    if (v.is_float()) return Value(std::fabs(v.as_double()));
    if (v.is_int() || v.is_bool()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    fail("TypeError: bad operand type for abs(): '" + v.type_name() + "'");
  }
  if (name == "round") return do_round(v, a);
  if (name == "int") return do_int(v, a);
  if (name == "float") return do_float(v, a);
  if (name == "bool") return Value(v.truthy());
  if (name == "batch") {
    int64_t n = arg(a, 0, "linecount").as_int();
    if (n <= 0) fail("ValueError: batch size must be positive");
    Value fill = arg(a, 1, "fill_with");
    std::vector<Value> out, cur;
    for (const Value& x : iterate(v)) {
      cur.push_back(x);
      if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::list(std::move(cur))), cur.clear();
    }
    if (!cur.empty()) {
      if (!fill.is_undefined() && !fill.is_none())
        while (static_cast<int64_t>(cur.size()) < n) cur.push_back(fill);
      out.push_back(Value::list(std::move(cur)));
    }
    return Value::generator(std::move(out));
  }
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    for (unsigned char c : v.to_str()) {
      bool w = std::isalnum(c) || c == '_' || c >= 0x80;
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value(n);
  }
  if (name == "center") {
    int64_t width = arg(a, 0, "width").is_undefined() ? 80 : arg(a, 0, "width").as_int();
    std::string s = v.to_str();
    auto len = static_cast<int64_t>(u8_length(s));
    if (len >= width) return Value(s);
    int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
    return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(pad - left), ' '));
  }
  if (name == "min" || name == "max") return min_max(v, a, name == "max");
  if (name == "sum") {
    Value attribute = arg(a, 0, "attribute");
    Value total = arg(a, 1, "start").is_undefined() ? Value(int64_t{0}) : arg(a, 1, "start");
    for (const Value& x : iterate(v))
      total = binary_op("+", total, attribute.is_undefined() ? x : attr_path(x, attribute));
    return total;
  }
  if (name == "attr") {  // Python attributes only: a dict's keys are not (jinja2's sandboxed getattr)
    if (v.is_dict() && !v.is_namespace()) {
      Value m = get_attr(v, arg(a, 0, "name").to_str());
      return m.is_function() ? m
                             : Value::undefined("'dict object' has no attribute '" + arg(a, 0, "name").to_str() + "'");
    }
    return get_attr(v, arg(a, 0, "name").to_str());
  }
  if (name == "format") {
    if (!a.kw.empty()) fail("FilterArgumentError: can't handle positional and keyword arguments at the same time");
    return Value(percent_format(v.to_str(), Value::list(a.pos, true)));
  }
  if (name == "pprint") return Value(v.repr());
  fail("TemplateAssertionError: No filter named '" + name + "'.");
}

}  // namespace ns::chat::jinja
