// JSON Schema -> GBNF: each supported feature accepts what the schema allows and nothing else;
// each unsupported one is refused with its JSON path.
#include <doctest/doctest.h>

#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/matcher.h"
#include "common/error.h"
#include "tests/unit/error_message.h"

using namespace ns::grammar;
using ojson = nlohmann::ordered_json;

namespace {

struct Compiled {
  Grammar g;
  explicit Compiled(const char* schema) : g(parse_gbnf(json_schema_to_gbnf(ojson::parse(schema)))) {}
  bool ok(std::string_view s) const {
    Matcher m(g);
    return m.accept_bytes(s) && m.complete();
  }
};

// The refusal of `schema`, or "" if it compiles.
std::string refusal(const char* schema) {
  return ns::test::error_message(ns::ErrorKind::invalid_input, [&] { json_schema_to_gbnf(ojson::parse(schema)); });
}

}  // namespace

TEST_CASE("schema: object with required, optional and additionalProperties false") {
  const Compiled c(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
                       "tags":{"type":"array","items":{"type":"string"}}},"required":["name"],
                       "additionalProperties":false})");
  CHECK(c.ok(R"({"name":"x"})"));
  CHECK(c.ok(R"({"name": "x", "age": 3})"));
  CHECK(c.ok("{\n  \"name\": \"x\",\n  \"tags\": [\"a\", \"b\"]\n}"));
  CHECK(c.ok(R"({"name":"x","age":-12,"tags":[]})"));
  CHECK_FALSE(c.ok(R"({})"));                        // name is required
  CHECK_FALSE(c.ok(R"({"age":3})"));
  CHECK_FALSE(c.ok(R"({"name":"x","other":1})"));    // no additional properties
  CHECK_FALSE(c.ok(R"({"name":"x","age":3.5})"));    // integer
  CHECK_FALSE(c.ok(R"({"name":"x",})"));
  CHECK_FALSE(c.ok(R"({"name":"x"} )"));             // nothing after the value: generation ends there
  const Compiled none(R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"}}})");
  CHECK(none.ok("{}"));
  CHECK(none.ok(R"({"b":null})"));
  CHECK(none.ok(R"({"a":true,"b":null})"));
  CHECK_FALSE(none.ok(R"({"b":null,"a":true})"));  // declared order
}

TEST_CASE("schema: nested objects, arrays with min/max items, enum, const") {
  const Compiled c(R"({"type":"object","properties":{
      "kind":{"enum":["a","b\"q",3,null]},
      "v":{"const":{"x":[1,2]}},
      "pts":{"type":"array","items":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"],
             "additionalProperties":false},"minItems":1,"maxItems":2}},
      "required":["kind","v","pts"],"additionalProperties":false})");
  CHECK(c.ok(R"({"kind":"a","v":{"x":[1,2]},"pts":[{"x":1.5e3}]})"));
  CHECK(c.ok(R"({"kind":"b\"q","v":{"x":[1,2]},"pts":[{"x":0},{"x":-0.25}]})"));
  CHECK(c.ok(R"({"kind":3,"v":{"x":[1,2]},"pts":[{"x":1}]})"));
  CHECK(c.ok(R"({"kind":null,"v":{"x":[1,2]},"pts":[{"x":1}]})"));
  CHECK_FALSE(c.ok(R"({"kind":"c","v":{"x":[1,2]},"pts":[{"x":1}]})"));
  CHECK_FALSE(c.ok(R"({"kind":"a","v":{"x":[1,3]},"pts":[{"x":1}]})"));
  CHECK_FALSE(c.ok(R"({"kind":"a","v":{"x":[1,2]},"pts":[]})"));
  CHECK_FALSE(c.ok(R"({"kind":"a","v":{"x":[1,2]},"pts":[{"x":1},{"x":2},{"x":3}]})"));
  CHECK_FALSE(c.ok(R"({"kind":"a","v":{"x":[1,2]},"pts":[{"x":01}]})"));
  CHECK(c.ok(R"({"kind":"a","v":{"x":[1,2]},"pts":[{"x":1e-99}]})"));
  CHECK_FALSE(c.ok(R"({"kind":"a","v":{"x":[1,2]},"pts":[{"x":1e528}]})"));  // not a finite double
}

TEST_CASE("schema: strings with escapes and lengths") {
  const Compiled c(R"({"type":"string","minLength":2,"maxLength":3})");
  CHECK(c.ok(R"("ab")"));
  CHECK(c.ok(R"("a\nb")"));
  CHECK(c.ok(R"("\u00e9\"\\")"));
  CHECK(c.ok("\"\xC3\xA9t\xC3\xA9\""));
  CHECK_FALSE(c.ok(R"("a")"));
  CHECK_FALSE(c.ok(R"("abcd")"));
  CHECK_FALSE(c.ok("\"a\nb\""));  // a raw newline is not allowed in a JSON string
  CHECK_FALSE(c.ok(R"("a\qb")"));
}

TEST_CASE("schema: type lists, anyOf, oneOf, $ref, booleans, empty schema") {
  const Compiled t(R"({"type":["string","null"]})");
  CHECK(t.ok("null"));
  CHECK(t.ok(R"("x")"));
  CHECK_FALSE(t.ok("1"));
  const Compiled any(R"({"anyOf":[{"type":"integer"},{"type":"boolean"}]})");
  CHECK(any.ok("12"));
  CHECK(any.ok("false"));
  CHECK_FALSE(any.ok("\"x\""));
  const Compiled one(R"({"oneOf":[{"type":"integer"},{"type":"array","items":{"type":"integer"},"maxItems":2}]})");
  CHECK(one.ok("[1,2]"));
  CHECK_FALSE(one.ok("[1,2,3]"));
  const Compiled ref(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],"additionalProperties":false}},
      "$ref":"#/$defs/node"})");
  CHECK(ref.ok(R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"));
  CHECK_FALSE(ref.ok(R"({"v":1,"kids":[{"w":2}]})"));
  const Compiled empty(R"({})");
  CHECK(empty.ok(R"([1,{"a":"b"},null,true,"s",-1.5E+3])"));
  const Compiled mode(R"({"type":"object"})");
  CHECK(mode.ok(R"({"anything":[1,2,{"x":null}]})"));
  CHECK_FALSE(mode.ok(R"([1])"));
  const Grammar object_mode = parse_gbnf(json_object_gbnf());
  Matcher m(object_mode);
  CHECK(m.accept_bytes(R"({"a": [1, "b"]})"));
  CHECK(m.complete());
}

TEST_CASE("schema: unsupported features are refused with their JSON path") {
  CHECK(refusal(R"({"type":"object","properties":{"date":{"type":"string","format":"date"}}})") ==
        "$.properties.date.format: \"format\" is not supported; remove it (the value is then any string)");
  CHECK(refusal(R"({"type":"string","pattern":"^a"})").find("$.pattern: \"pattern\" is not supported") == 0);
  CHECK(refusal(R"({"type":"integer","minimum":0})").find("$.minimum: ") == 0);
  CHECK(refusal(R"({"allOf":[{},{}]})").find("$.allOf: ") == 0);
  CHECK(refusal(R"({"type":"array","items":{"type":"object","properties":{"a":{"not":{}}}}})")
            .find("$.items.properties.a.not: ") == 0);
  CHECK(refusal(R"({"type":"object","additionalProperties":{"type":"string"}})").find("$.additionalProperties: ") == 0);
  CHECK(refusal(R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":2}]})").find("$.oneOf: alternatives 0 and 1") == 0);
  CHECK(refusal(R"({"$ref":"#/$defs/missing"})").find("$.$ref: ") == 0);
  CHECK(refusal(R"({"$ref":"other.json#/a"})").find("$.$ref: ") == 0);
  CHECK(refusal(R"({"type":"strin"})").find("$.type: unknown type \"strin\"") == 0);
  CHECK(refusal(R"({"type":"array","minItems":3,"maxItems":2})").find("$.maxItems: ") == 0);
  CHECK(refusal(R"({"type":"array","uniqueItems":true})").find("$.uniqueItems: ") == 0);
  CHECK(refusal(R"({"type":"object","properties":{},"required":["a"],"additionalProperties":false})")
            .find("$.required[0]: ") == 0);
  CHECK(refusal(R"({"type":"integer","const":"x"})").find("$.const: ") == 0);
  CHECK(refusal("false").find("$: ") == 0);
  CHECK(refusal("[1]").find("$: ") == 0);
  CHECK_THROWS_AS(json_schema_to_gbnf_cached("{not json"), ns::Error);
  // The cache gives the same text as a fresh compile.
  const char* s = R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}})";
  CHECK(json_schema_to_gbnf_cached(s) == json_schema_to_gbnf(ojson::parse(s)));
  CHECK(json_schema_to_gbnf_cached(s) == json_schema_to_gbnf(ojson::parse(s)));
}
