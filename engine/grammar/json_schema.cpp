// JSON Schema -> GBNF (contract in engine/grammar/json_schema.h).
#include "engine/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "engine/grammar/grammar.h"
#include "engine/grammar/schema_strings.h"
#include "common/error.h"

namespace ns::grammar {
namespace {

using ojson = nlohmann::ordered_json;

constexpr int kMaxCount = 10000;  // the GBNF parser's repetition limit

// The shared rules, each emitted only when used.
const std::pair<const char*, const char*> kPrimitives[] = {
    {"ws", R"(| " " | "\n" [ \t]{0,20})"},
    {"char", R"([^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))"},
    {"string", R"("\"" char* "\"")"},
    {"integer", R"("-"? ("0" | [1-9] [0-9]{0,15}))"},
    {"number", R"(integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?)"},
    {"boolean", R"("true" | "false")"},
    {"null", R"("null")"},
    {"value", R"(object | array | string | number | boolean | null)"},
    {"object", R"("{" ws (string ws ":" ws value (ws "," ws string ws ":" ws value)* ws)? "}")"},
    {"array", R"("[" ws (value (ws "," ws value)* ws)? "]")"},
};
// What each shared rule refers to.
const std::map<std::string, std::vector<std::string>> kPrimitiveDeps = {
    {"string", {"char"}},
    {"number", {"integer"}},
    {"value", {"object", "array", "string", "number", "boolean", "null"}},
    {"object", {"ws", "string", "value"}},
    {"array", {"ws", "value"}},
};

const std::set<std::string> kAnnotations = {"title",    "description", "$schema",  "$id",
                                            "$comment", "default",     "examples", "deprecated",
                                            "readOnly", "writeOnly",   "$defs",    "definitions"};
const std::set<std::string> kKnown = {"type",
                                      "enum",
                                      "const",
                                      "anyOf",
                                      "oneOf",
                                      "$ref",
                                      "properties",
                                      "required",
                                      "additionalProperties",
                                      "items",
                                      "minItems",
                                      "maxItems",
                                      "minLength",
                                      "maxLength",
                                      "pattern",
                                      "format",
                                      "minimum",
                                      "maximum",
                                      "exclusiveMinimum",
                                      "exclusiveMaximum"};
const char* const kBounds[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

std::string hint_for(const std::string& key) {
  if (key == "multipleOf")
    return "remove it and check the value after generation, or list the allowed values in an enum";
  if (key == "allOf") return "merge its subschemas into one schema";
  if (key == "uniqueItems") return "remove it (items may then repeat) or use an enum per position";
  if (key == "patternProperties" || key == "propertyNames" || key == "unevaluatedProperties" ||
      key == "minProperties" || key == "maxProperties" || key == "dependentRequired" || key == "dependentSchemas")
    return "list the properties under \"properties\" instead";
  return "remove it";
}

std::string gbnf_literal(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = "\"";
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (b < 0x20 || b == 0x7F) {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_literal(const ojson& v) {
  return gbnf_literal(v.dump(-1, ' ', false, ojson::error_handler_t::replace));
}

// The JSON types a value of `v` can have ("integer" counted as "number").
std::string json_type_of(const ojson& v) {
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  if (v.is_string()) return "string";
  if (v.is_number()) return "number";
  if (v.is_boolean()) return "boolean";
  return "null";
}

class Compiler {
 public:
  explicit Compiler(const ojson& root) : root_(root) {}

  std::string run() {
    const std::string top = visit(root_, "$", "root");
    std::string out = "root ::= " + top + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    for (const auto& [name, body] : kPrimitives)
      if (used_.count(name)) out += std::string(name) + " ::= " + body + "\n";
    return out;
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw Error(ErrorKind::invalid_input, path + ": " + what);
  }

  std::string use(const std::string& prim) {
    if (used_.insert(prim).second) {
      const auto deps = kPrimitiveDeps.find(prim);
      if (deps != kPrimitiveDeps.end())
        for (const std::string& d : deps->second) use(d);
    }
    return prim;
  }

  // A rule for `body`, shared with any identical one.
  std::string rule(const std::string& body, const std::string& hint) {
    if (const auto it = by_body_.find(body); it != by_body_.end()) return it->second;
    std::string name = "s-" + hint;
    for (char& c : name)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) c = '-';
    if (taken_.count(name)) name += "-" + std::to_string(taken_.size());
    taken_.insert(name);
    rules_.emplace_back(name, body);
    by_body_.emplace(body, name);
    return name;
  }

  static int64_t count(const ojson& s, const char* key, const std::string& path, int64_t absent) {
    const auto it = s.find(key);
    if (it == s.end()) return absent;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > kMaxCount)
      fail(path + "." + key, std::string("\"") + key + "\" must be an integer in 0.." + std::to_string(kMaxCount));
    return it->get<int64_t>();
  }

  // GBNF for {min,max} repetitions of `x` (max -1 = unbounded).
  static std::string repeat(const std::string& x, int64_t min, int64_t max) {
    if (min == 0 && max < 0) return x + "*";
    if (min == 1 && max < 0) return x + "+";
    if (min == 0 && max == 1) return x + "?";
    if (max < 0) return x + "{" + std::to_string(min) + ",}";
    if (min == max) return min == 1 ? x : x + "{" + std::to_string(min) + "}";
    return x + "{" + std::to_string(min) + "," + std::to_string(max) + "}";
  }

  void check_keywords(const ojson& s, const std::string& path) {
    for (const auto& [key, v] : s.items()) {
      if (kAnnotations.count(key) || kKnown.count(key)) continue;
      fail(path + "." + key, "\"" + key + "\" is not supported; " + hint_for(key));
    }
  }

  std::string visit(const ojson& s, const std::string& path, const std::string& hint) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(path, "the schema false matches nothing");
      return use("value");
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean, not " + std::string(s.type_name()));
    ojson copy;
    const ojson* node = &s;
    if (const auto u = s.find("uniqueItems"); u != s.end() && u->is_boolean() && !u->get<bool>()) {
      copy = s;  // uniqueItems: false is the default: drop it
      copy.erase("uniqueItems");
      node = &copy;
    }
    check_keywords(*node, path);
    const ojson& n = *node;
    if (const auto ref = n.find("$ref"); ref != n.end()) return visit_ref(n, *ref, path);
    if (const auto c = n.find("const"); c != n.end()) {
      check_type_allows(n, *c, path + ".const");
      return json_literal(*c);
    }
    if (const auto e = n.find("enum"); e != n.end()) {
      if (!e->is_array() || e->empty()) fail(path + ".enum", "\"enum\" must be a non-empty array");
      std::string alts;
      for (size_t i = 0; i < e->size(); ++i) {
        check_type_allows(n, (*e)[i], path + ".enum[" + std::to_string(i) + "]");
        alts += (i ? " | " : "") + json_literal((*e)[i]);
      }
      return rule(alts, hint);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      const auto it = n.find(key);
      if (it == n.end()) continue;
      if (!it->is_array() || it->empty())
        fail(path + "." + key, std::string("\"") + key + "\" must be a non-empty array");
      for (const auto& [k, v] : n.items())
        if (k != key && !kAnnotations.count(k))
          fail(path + "." + k, "\"" + k + "\" beside \"" + key + "\" is not supported; move it into each alternative");
      if (std::string(key) == "oneOf") check_disjoint(*it, path + ".oneOf");
      std::string alts;
      for (size_t i = 0; i < it->size(); ++i)
        alts += (i ? " | " : "") +
                visit((*it)[i], path + "." + key + "[" + std::to_string(i) + "]", hint + "-" + std::to_string(i));
      return rule(alts, hint);
    }
    std::vector<std::string> types;
    if (const auto t = n.find("type"); t != n.end()) {
      if (t->is_string()) {
        types.push_back(t->get<std::string>());
      } else if (t->is_array() && !t->empty()) {
        for (const auto& x : *t) {
          if (!x.is_string()) fail(path + ".type", "\"type\" must be a type name or a list of them");
          types.push_back(x.get<std::string>());
        }
      } else {
        fail(path + ".type", "\"type\" must be a type name or a non-empty list of them");
      }
    } else if (n.contains("properties") || n.contains("required") || n.contains("additionalProperties")) {
      types.push_back("object");
    } else if (n.contains("items") || n.contains("minItems") || n.contains("maxItems")) {
      types.push_back("array");
    } else if (n.contains("minLength") || n.contains("maxLength") || n.contains("pattern") || n.contains("format")) {
      types.push_back("string");
    } else if (std::any_of(std::begin(kBounds), std::end(kBounds), [&](const char* k) { return n.contains(k); })) {
      types.push_back("number");  // refused below with the fix: bounds are compiled for integers
    } else {
      return use("value");
    }
    std::string alts;
    for (size_t i = 0; i < types.size(); ++i) alts += (i ? " | " : "") + typed(n, types[i], path, hint);
    return types.size() == 1 ? alts : rule(alts, hint);
  }

  static void check_type_allows(const ojson& s, const ojson& v, const std::string& path) {
    const auto t = s.find("type");
    if (t == s.end()) return;
    std::vector<std::string> types;
    if (t->is_string())
      types.push_back(t->get<std::string>());
    else if (t->is_array())
      for (const auto& x : *t)
        if (x.is_string()) types.push_back(x.get<std::string>());
    for (const std::string& ty : types) {
      if (ty == json_type_of(v)) return;
      if (ty == "integer" && v.is_number_integer()) return;
    }
    fail(path, "the value " + v.dump() + " is not of the schema's \"type\"");
  }

  // The JSON types a schema can produce, or empty when it is not known here.
  std::set<std::string> types_of(const ojson& s, int depth = 0) {
    if (!s.is_object() || depth > 16) return {};
    if (const auto ref = s.find("$ref"); ref != s.end() && ref->is_string()) {
      const ojson* target = resolve(ref->get<std::string>());
      return target ? types_of(*target, depth + 1) : std::set<std::string>{};
    }
    std::set<std::string> out;
    if (const auto c = s.find("const"); c != s.end()) return {json_type_of(*c)};
    if (const auto e = s.find("enum"); e != s.end() && e->is_array()) {
      for (const auto& v : *e) out.insert(json_type_of(v));
      return out;
    }
    if (const auto t = s.find("type"); t != s.end()) {
      auto add = [&](const std::string& ty) { out.insert(ty == "integer" ? "number" : ty); };
      if (t->is_string())
        add(t->get<std::string>());
      else if (t->is_array())
        for (const auto& x : *t)
          if (x.is_string()) add(x.get<std::string>());
      return out;
    }
    if (s.contains("properties")) return {"object"};
    return {};
  }

  void check_disjoint(const ojson& alts, const std::string& path) {
    std::vector<std::set<std::string>> sets;
    for (size_t i = 0; i < alts.size(); ++i) {
      sets.push_back(types_of(alts[i]));
      if (sets.back().empty())
        fail(path + "[" + std::to_string(i) + "]",
             "oneOf needs alternatives of different JSON types here (so that exactly one matches); give this one "
             "a \"type\", or use anyOf");
      for (size_t j = 0; j < i; ++j)
        for (const std::string& t : sets[i])
          if (sets[j].count(t))
            fail(path, "alternatives " + std::to_string(j) + " and " + std::to_string(i) + " can both match a " + t +
                           ", and oneOf allows exactly one match; use anyOf or give them different types");
    }
  }

  const ojson* resolve(const std::string& ref) const {
    if (ref == "#") return &root_;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (ref.rfind(p, 0) != 0) continue;
      const std::string container = p.substr(2, p.size() - 3);
      const auto defs = root_.find(container);
      if (defs == root_.end() || !defs->is_object()) return nullptr;
      const auto it = defs->find(ref.substr(p.size()));
      return it == defs->end() ? nullptr : &*it;
    }
    return nullptr;
  }

  std::string visit_ref(const ojson& s, const ojson& ref, const std::string& path) {
    for (const auto& [k, v] : s.items())
      if (k != "$ref" && !kAnnotations.count(k))
        fail(path + "." + k, "\"" + k + "\" beside \"$ref\" is not supported; move it into the referenced schema");
    if (!ref.is_string()) fail(path + ".$ref", "\"$ref\" must be a string");
    const std::string r = ref.get<std::string>();
    if (const auto it = ref_rules_.find(r); it != ref_rules_.end()) return it->second;
    const ojson* target = resolve(r);
    if (!target)
      fail(path + ".$ref", "\"" + r +
                               "\" is not supported or not found; use \"#/$defs/NAME\" with NAME under "
                               "\"$defs\" (or \"definitions\") at the top of the schema, or \"#\"");
    // Named before it is compiled, so a recursive reference finds the name.
    std::string name = "ref-" + (r == "#" ? std::string("root") : r.substr(r.rfind('/') + 1));
    for (char& c : name)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) c = '-';
    while (taken_.count(name)) name += "-";
    taken_.insert(name);
    ref_rules_.emplace(r, name);
    const size_t slot = rules_.size();
    rules_.emplace_back(name, "");
    const std::string where = r == "#" ? "$" : "$" + r.substr(1);
    std::string where_dotted = where;
    for (char& c : where_dotted)
      if (c == '/') c = '.';
    rules_[slot].second = visit(*target, where_dotted, name.substr(4));
    return name;
  }

  std::string typed(const ojson& s, const std::string& type, const std::string& path, const std::string& hint) {
    if (type == "string") {
      if (s.contains("pattern") || s.contains("format")) return constrained_string(s, path, hint);
      const int64_t min = count(s, "minLength", path, 0), max = count(s, "maxLength", path, -1);
      if (max >= 0 && max < min) fail(path + ".maxLength", "\"maxLength\" is below \"minLength\"");
      if (min == 0 && max < 0) return use("string");
      use("char");
      return rule("\"\\\"\" " + repeat("char", min, max) + " \"\\\"\"", hint);
    }
    if (type == "integer") return integer(s, path, hint);
    if (type == "number")
      for (const char* k : kBounds)
        if (s.contains(k))
          fail(path + "." + k, std::string("\"") + k +
                                   "\" is supported for \"type\": \"integer\" only; use an "
                                   "integer type, or remove it and check the range after generation");
    if (type == "number" || type == "boolean" || type == "null") return use(type);
    if (type == "array") return array(s, path, hint);
    if (type == "object") return object(s, path, hint);
    fail(path + ".type", "unknown type \"" + type + "\": use string, number, integer, boolean, null, object or array");
  }

  // A string with `pattern` or `format` (engine/grammar/schema_strings.h).
  std::string constrained_string(const ojson& s, const std::string& path, const std::string& hint) {
    const char* key = s.contains("pattern") ? "pattern" : "format";
    if (s.contains("pattern") && s.contains("format"))
      fail(path + ".format", "\"format\" beside \"pattern\" is not supported; keep one of them");
    for (const char* len : {"minLength", "maxLength"})
      if (s.contains(len))
        fail(path + "." + len,
             std::string("\"") + len + "\" beside \"" + key + "\" is not supported; " +
                 (std::string(key) == "pattern" ? "put the length into the pattern, e.g. [a-z]{2,8}" : "remove it"));
    const ojson& v = s.at(key);
    if (!v.is_string()) fail(path + "." + key, std::string("\"") + key + "\" must be a string");
    const std::string text = v.get<std::string>();
    if (std::string(key) == "format") {
      const std::string g = format_gbnf(text);
      if (g.empty())
        fail(path + ".format", "format \"" + text +
                                   "\" is not supported (date, time, date-time, email and uuid "
                                   "are); remove it (the value is then any string) or give a \"pattern\"");
      return rule(g, hint);
    }
    try {
      return rule(pattern_gbnf(text), hint);
    } catch (const PatternError& e) {
      fail(path + ".pattern", std::string("the pattern has ") + e.what() +
                                  ", which is not supported; rewrite it "
                                  "with literals, classes, groups, | and quantifiers (^ and $ only at the ends)");
    }
  }

  // An integer, within its bounds if it has any.
  std::string integer(const ojson& s, const std::string& path, const std::string& hint) {
    double lo = -1e16, hi = 1e16;  // the integer rule's 16 digits (kIntegerLimit is not a double: 1e16 - 1)
    bool bounded = false;
    for (const char* k : kBounds) {
      const auto it = s.find(k);
      if (it == s.end()) continue;
      if (!it->is_number())
        fail(path + "." + k, std::string("\"") + k +
                                 "\" must be a number (a boolean is draft 4's form: give "
                                 "the bound itself)");
      const double v = it->get<double>();
      const std::string key = k;
      if (key == "minimum")
        lo = std::max(lo, std::ceil(v));
      else if (key == "exclusiveMinimum")
        lo = std::max(lo, std::floor(v) + 1);
      else if (key == "maximum")
        hi = std::min(hi, std::floor(v));
      else
        hi = std::min(hi, std::ceil(v) - 1);
      bounded = true;
    }
    if (!bounded) return use("integer");
    if (lo > hi || lo >= 1e16 || hi <= -1e16) {  // none, or none of at most 16 digits
      const auto shown = [](double x) { return std::to_string(static_cast<int64_t>(std::clamp(x, -1e18, 1e18))); };
      fail(path, "no integer is within the bounds (from " + shown(lo) + " to " + shown(hi) + ")");
    }
    // Wider bounds leave those ends as the integer rule has them.
    const auto whole = [](double x) {
      return x >= 1e16 ? kIntegerLimit : x <= -1e16 ? -kIntegerLimit : static_cast<int64_t>(x);
    };
    return rule(int_range_gbnf(whole(lo), whole(hi)), hint);
  }

  std::string array(const ojson& s, const std::string& path, const std::string& hint) {
    const int64_t min = count(s, "minItems", path, 0), max = count(s, "maxItems", path, -1);
    if (max >= 0 && max < min) fail(path + ".maxItems", "\"maxItems\" is below \"minItems\"");
    const auto items = s.find("items");
    if (items != s.end() && items->is_array())
      fail(path + ".items", "a list of item schemas (tuple form) is not supported; give one schema for every item");
    use("ws");
    const std::string item = items == s.end() ? use("value") : visit(*items, path + ".items", hint + "-item");
    if (max == 0) return rule("\"[\" ws \"]\"", hint);
    const std::string more = "(ws \",\" ws " + item + ")";
    std::string body;
    if (min == 0)
      body = "\"[\" ws (" + item + " " + repeat(more, 0, max < 0 ? -1 : max - 1) + " ws)? \"]\"";
    else
      body = "\"[\" ws " + item + " " + repeat(more, min - 1, max < 0 ? -1 : max - 1) + " ws \"]\"";
    return rule(body, hint);
  }

  std::string object(const ojson& s, const std::string& path, const std::string& hint) {
    use("ws");
    const auto props = s.find("properties");
    if (props != s.end() && !props->is_object()) fail(path + ".properties", "\"properties\" must be an object");
    const auto extra = s.find("additionalProperties");
    bool closed = false;
    if (extra != s.end()) {
      if (extra->is_boolean())
        closed = !extra->get<bool>();
      else if (extra->is_object() && extra->empty())
        closed = false;
      else
        fail(path + ".additionalProperties",
             "a schema for additional properties is not supported; list the properties under \"properties\" and "
             "set \"additionalProperties\": false");
    }
    std::vector<std::string> required;
    if (const auto req = s.find("required"); req != s.end()) {
      if (!req->is_array()) fail(path + ".required", "\"required\" must be an array of property names");
      for (size_t i = 0; i < req->size(); ++i) {
        if (!(*req)[i].is_string())
          fail(path + ".required[" + std::to_string(i) + "]", "\"required\" must list property names (strings)");
        const std::string name = (*req)[i].get<std::string>();
        if (std::find(required.begin(), required.end(), name) != required.end())
          fail(path + ".required[" + std::to_string(i) + "]", "\"" + name + "\" is listed twice");
        if (closed && (props == s.end() || !props->contains(name)))
          fail(path + ".required[" + std::to_string(i) + "]",
               "\"" + name + "\" is required but not under \"properties\", and additionalProperties is false");
        required.push_back(name);
      }
    }
    if (props == s.end() && required.empty()) return closed ? rule("\"{\" ws \"}\"", hint) : use("object");
    // Properties in `properties` order, required and optional alike, then the required ones
    // `properties` lacks. From the last one back: after_i = what may follow property i-1 once
    // something was written (each property led by a comma), from_i = what may come first.
    std::vector<std::string> kvs;
    std::vector<bool> req;
    auto kv = [&](const std::string& name, const std::string& value) {
      return json_literal(ojson(name)) + " ws \":\" ws " + value;
    };
    if (props != s.end())
      for (const auto& [name, sub] : props->items()) {
        req.push_back(std::find(required.begin(), required.end(), name) != required.end());
        kvs.push_back(kv(name, visit(sub, path + ".properties." + name, hint + "-" + name)));
      }
    for (const std::string& name : required)
      if (props == s.end() || !props->contains(name)) {
        req.push_back(true);
        kvs.push_back(kv(name, use("value")));
      }
    std::string after, from;  // "" = nothing
    const auto then = [](const std::string& a, const std::string& b) { return b.empty() ? a : a + " " + b; };
    for (size_t i = kvs.size(); i-- > 0;) {
      const std::string tag = hint + "-" + std::to_string(i);
      const std::string comma_kv = "ws \",\" ws " + kvs[i];
      const std::string first = then(kvs[i], after);
      if (req[i])
        from = rule(first, tag + "-first");
      else if (from.empty())
        from = rule("(" + first + ")?", tag + "-first");
      else
        from = rule(first + " | " + from, tag + "-first");
      after = rule(then(req[i] ? comma_kv : "(" + comma_kv + ")?", after), tag + "-next");
    }
    return rule("\"{\" ws " + then(from, "ws \"}\""), hint);
  }

  const ojson& root_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> by_body_;
  std::map<std::string, std::string> ref_rules_;
  std::set<std::string> taken_ = {"root"};
  std::set<std::string> used_;
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) { return Compiler(schema).run(); }

std::string json_schema_to_gbnf_cached(std::string_view schema_text) {
  static std::mutex mu;
  static std::unordered_map<uint64_t, std::pair<std::string, std::string>> cache;
  const uint64_t h = text_hash(schema_text);
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = cache.find(h);
    if (it != cache.end() && it->second.first == schema_text) return it->second.second;
  }
  ojson schema;
  try {
    schema = ojson::parse(schema_text);
  } catch (const ojson::parse_error& e) {
    throw Error(ErrorKind::invalid_input, std::string("$: the schema is not valid JSON: ") + e.what());
  }
  std::string gbnf = json_schema_to_gbnf(schema);
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 256) cache.clear();
  cache[h] = {std::string(schema_text), gbnf};
  return gbnf;
}

std::string json_object_gbnf() {
  std::string out = "root ::= object\n";
  for (const auto& [name, body] : kPrimitives) out += std::string(name) + " ::= " + body + "\n";
  return out;
}

}  // namespace ns::grammar
