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
  CHECK_FALSE(c.ok(R"({})"));  // name is required
  CHECK_FALSE(c.ok(R"({"age":3})"));
  CHECK_FALSE(c.ok(R"({"name":"x","other":1})"));  // no additional properties
  CHECK_FALSE(c.ok(R"({"name":"x","age":3.5})"));  // integer
  CHECK_FALSE(c.ok(R"({"name":"x",})"));
  CHECK_FALSE(c.ok(R"({"name":"x"} )"));  // nothing after the value: generation ends there
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
  CHECK(refusal(R"({"type":"object","properties":{"date":{"type":"string","format":"week"}}})")
            .find("$.properties.date.format: format \"week\" is not supported") == 0);
  CHECK(refusal(R"({"type":"number","minimum":0})").find("$.minimum: ") == 0);
  CHECK(refusal(R"({"type":"integer","multipleOf":2})").find("$.multipleOf: ") == 0);
  CHECK(refusal(R"({"allOf":[{},{}]})").find("$.allOf: ") == 0);
  CHECK(refusal(R"({"type":"array","items":{"type":"object","properties":{"a":{"not":{}}}}})")
            .find("$.items.properties.a.not: ") == 0);
  CHECK(refusal(R"({"type":"object","additionalProperties":{"type":"string"}})").find("$.additionalProperties: ") == 0);
  CHECK(refusal(R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":2}]})")
            .find("$.oneOf: alternatives 0 and 1") == 0);
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

namespace {
std::string quoted(const std::string& s) { return "\"" + s + "\""; }
}  // namespace

TEST_CASE("schema: pattern, anchored and not") {
  const Compiled c(R"({"type":"string","pattern":"^[a-z]{2,4}-\\d+$"})");
  CHECK(c.ok(quoted("ab-1")));
  CHECK(c.ok(quoted("abcd-123")));
  CHECK_FALSE(c.ok(quoted("a-1")));
  CHECK_FALSE(c.ok(quoted("abcde-1")));
  CHECK_FALSE(c.ok(quoted("ab-")));
  CHECK_FALSE(c.ok(quoted("AB-1")));
  CHECK_FALSE(c.ok(quoted("ab-1x")));
  CHECK_FALSE(c.ok("ab-1"));  // a JSON string, quotes included
  // JSON Schema patterns are not anchored: without ^ and $ the match may be anywhere.
  const Compiled any(R"({"pattern":"\\d{3}"})");
  CHECK(any.ok(quoted("123")));
  CHECK(any.ok(quoted("x123y")));
  CHECK(any.ok(quoted("a\\\"b 9876")));
  CHECK_FALSE(any.ok(quoted("12x3")));
  CHECK_FALSE(any.ok("123"));
  const Compiled start(R"({"type":"string","pattern":"^ab"})");
  CHECK(start.ok(quoted("abc")));
  CHECK_FALSE(start.ok(quoted("cab")));
  const Compiled end(R"({"type":"string","pattern":"ab$"})");
  CHECK(end.ok(quoted("cab")));
  CHECK_FALSE(end.ok(quoted("abc")));
}

TEST_CASE("schema: pattern groups, alternation, quantifiers, classes, escapes") {
  const Compiled alt(R"({"type":"string","pattern":"^(cat|dog)s?(?:!{1,2})*$"})");
  for (const char* s : {"cat", "dogs", "cat!", "dogs!!!", "cats!!"}) CHECK(alt.ok(quoted(s)));
  for (const char* s : {"", "cow", "catss", "s", "cat?"}) CHECK_FALSE(alt.ok(quoted(s)));
  const Compiled exact(R"({"type":"string","pattern":"^\\w{3}\\s\\.{2,}[^0-9A-Z]+x?$"})");
  CHECK(exact.ok(quoted("a_9 ..b")));
  CHECK(exact.ok(quoted("abc\\t...!x")));  // \s matches a tab, written \t
  CHECK_FALSE(exact.ok(quoted("ab ..b")));
  CHECK_FALSE(exact.ok(quoted("abc .b")));
  CHECK_FALSE(exact.ok(quoted("abc ..B")));
  CHECK_FALSE(exact.ok(quoted("abc ..")));
  // Quotes, backslashes and control characters are written as JSON writes them.
  const Compiled special(R"({"type":"string","pattern":"^a\"b\\\\c\\n[^a]$"})");
  CHECK(special.ok(R"("a\"b\\c\n\"")"));
  CHECK(special.ok(R"("a\"b\\c\n\u001f")"));
  CHECK(special.ok(R"("a\"b\\c\nz")"));
  CHECK_FALSE(special.ok(R"("a\"b\\c\na")"));
  CHECK_FALSE(special.ok(R"("a"b\\c\nz")"));
  const Compiled dot(R"({"type":"string","pattern":"^.+$"})");
  CHECK(dot.ok(quoted("x\\ty\\\"")));
  CHECK(dot.ok(quoted("\xC3\xA9\xE2\x82\xAC")));
  CHECK_FALSE(dot.ok(quoted("x\\ny")));  // . is not a newline
  CHECK_FALSE(dot.ok(quoted("")));
  const Compiled uni(R"({"type":"string","pattern":"^[\u00e0-\u00ff]{2}\\u20ac$"})");
  CHECK(uni.ok(quoted("\xC3\xA9\xC3\xA0\xE2\x82\xAC")));
  CHECK_FALSE(uni.ok(quoted("e\xC3\xA0\xE2\x82\xAC")));
  const Compiled punct(R"({"type":"string","pattern":"^\\(\\d\\)[-+*/]\\{\\}\\$$"})");
  CHECK(punct.ok(quoted("(1)-{}$")));
  CHECK(punct.ok(quoted("(1)/{}$")));
  CHECK_FALSE(punct.ok(quoted("(1)x{}$")));
}

TEST_CASE("schema: unsupported pattern constructs are refused with the path and the construct") {
  const auto at = [](const char* pattern) {
    return refusal(
        ("{\"properties\":{\"code\":{\"type\":\"string\",\"pattern\":" + ojson(pattern).dump() + "}}}").c_str());
  };
  CHECK(at("(?=a)b").find("$.properties.code.pattern: the pattern has a lookahead (?=...) at offset 2") == 0);
  CHECK(at("(?<!a)b").find("a lookbehind (?<!...)") != std::string::npos);
  CHECK(at("(a)\\1").find("a backreference \\1 at offset 4") != std::string::npos);
  CHECK(at("\\bword").find("a word boundary \\b") != std::string::npos);
  CHECK(at("\\p{L}").find("a Unicode property escape \\p") != std::string::npos);
  CHECK(at("a^b").find("\"^\" is supported only at the start") != std::string::npos);
  CHECK(at("a$b").find("\"$\" is supported only at the end") != std::string::npos);
  CHECK(at("(ab").find("a \"(\" without its \")\"") != std::string::npos);
  CHECK(at("ab)").find("an unmatched \")\"") != std::string::npos);
  CHECK(at("[ab").find("a \"[\" without its \"]\"") != std::string::npos);
  CHECK(at("*a").find("nothing before it to repeat") != std::string::npos);
  CHECK(at("a{3,1}").find("maximum is below its minimum") != std::string::npos);
  CHECK(at("a{20000}").find("above 10000") != std::string::npos);
  CHECK(at("[z-a]").find("out of order") != std::string::npos);
  CHECK(refusal(R"({"type":"string","pattern":"^a+$","maxLength":3})").find("$.maxLength: ") == 0);
  CHECK(refusal(R"({"type":"string","pattern":"^a$","format":"date"})").find("$.format: ") == 0);
  CHECK(refusal(R"({"type":"string","pattern":7})").find("$.pattern: \"pattern\" must be a string") == 0);
}

TEST_CASE("schema: format date, time, date-time, uuid, email") {
  const Compiled date(R"({"type":"string","format":"date"})");
  for (const char* s : {"2024-02-29", "1999-12-31", "0001-01-01"}) CHECK(date.ok(quoted(s)));
  for (const char* s : {"2024-13-01", "2024-00-10", "2024-01-32", "24-01-01", "2024-1-01", "2024-01-01T"})
    CHECK_FALSE(date.ok(quoted(s)));
  const Compiled time(R"({"type":"string","format":"time"})");
  for (const char* s : {"00:00:00Z", "23:59:59.123+05:30", "12:30:00-08:00"}) CHECK(time.ok(quoted(s)));
  for (const char* s : {"24:00:00Z", "12:60:00Z", "12:00:00", "12:00Z", "12:00:00.1Z"}) CHECK_FALSE(time.ok(quoted(s)));
  const Compiled dt(R"({"format":"date-time"})");
  CHECK(dt.ok(quoted("2024-01-31T23:59:59Z")));
  CHECK(dt.ok(quoted("2024-01-31T23:59:59.500+01:00")));
  CHECK_FALSE(dt.ok(quoted("2024-01-31 23:59:59Z")));
  CHECK_FALSE(dt.ok(quoted("2024-01-31T23:59:59")));
  const Compiled uuid(R"({"type":"string","format":"uuid"})");
  CHECK(uuid.ok(quoted("123e4567-e89b-12d3-A456-426614174000")));
  CHECK_FALSE(uuid.ok(quoted("123e4567-e89b-12d3-a456-42661417400")));
  CHECK_FALSE(uuid.ok(quoted("123e4567e89b12d3a456426614174000")));
  CHECK_FALSE(uuid.ok(quoted("g23e4567-e89b-12d3-a456-426614174000")));
  const Compiled email(R"({"type":"string","format":"email"})");
  for (const char* s : {"a@example.com", "first.last+tag@mail.example.co.uk", "x_1%@a-b.io"})
    CHECK(email.ok(quoted(s)));
  for (const char* s : {"a@b", "@example.com", "a..b@example.com", "a@-x.com", "a@x-.com", "a b@x.com", "a@x.c0m"})
    CHECK_FALSE(email.ok(quoted(s)));
  // On other types format is an annotation (OpenAPI's int32, float).
  const Compiled i32(R"({"type":"integer","format":"int32"})");
  CHECK(i32.ok("-12"));
  CHECK_FALSE(i32.ok("1.5"));
}

TEST_CASE("schema: integer bounds accept exactly the integers in range") {
  struct Case {
    const char* schema;
    int64_t lo, hi;
  };
  const Case cases[] = {
      {R"({"type":"integer","minimum":0,"maximum":100})", 0, 100},
      {R"({"type":"integer","minimum":-5,"maximum":5})", -5, 5},
      {R"({"type":"integer","minimum":-120,"maximum":-7})", -120, -7},
      {R"({"type":"integer","minimum":7,"maximum":1234})", 7, 1234},
      {R"({"type":"integer","minimum":13,"maximum":4821})", 13, 4821},
      {R"({"type":"integer","minimum":1,"maximum":1})", 1, 1},
      {R"({"type":"integer","minimum":0,"maximum":0})", 0, 0},
      {R"({"type":"integer","exclusiveMinimum":-1000,"exclusiveMaximum":1000})", -999, 999},
      {R"({"type":"integer","minimum":1.5,"maximum":99.5})", 2, 99},
      {R"({"type":"integer","exclusiveMinimum":0.5,"exclusiveMaximum":10.5})", 1, 10},
      {R"({"type":"integer","minimum":-3099,"maximum":-3000})", -3099, -3000},
      {R"({"type":"integer","minimum":95,"maximum":105})", 95, 105},
  };
  for (const Case& k : cases) {
    CAPTURE(k.schema);
    const Compiled c(k.schema);
    for (int64_t v = k.lo - 1200; v <= k.hi + 1200; ++v) {
      CAPTURE(v);
      CHECK(c.ok(std::to_string(v)) == (v >= k.lo && v <= k.hi));
    }
    CHECK_FALSE(c.ok("-0"));
    CHECK_FALSE(c.ok("01"));
    CHECK_FALSE(c.ok(std::to_string(k.lo) + ".0"));
  }
  // One-sided bounds run to the integer rule's 16 digits.
  const Compiled positive(R"({"type":"integer","exclusiveMinimum":0})");
  for (const char* s : {"1", "9", "10", "4821", "9999999999999999"}) CHECK(positive.ok(s));
  for (const char* s : {"0", "-1", "-0", "10000000000000000", "007"}) CHECK_FALSE(positive.ok(s));
  const Compiled at_most(R"({"type":["integer","null"],"maximum":-10})");
  for (const char* s : {"-10", "-11", "-9999999999999999", "null"}) CHECK(at_most.ok(s));
  for (const char* s : {"-9", "0", "10", "-10000000000000000"}) CHECK_FALSE(at_most.ok(s));
  const Compiled huge(R"({"type":"integer","minimum":-1e300,"maximum":1e300})");
  CHECK(huge.ok("-9999999999999999"));
  CHECK(huge.ok("123"));
  CHECK(refusal(R"({"type":"integer","minimum":5,"maximum":4})")
            .find("$: no integer is within the bounds (from 5 to 4)") == 0);
  CHECK(refusal(R"({"type":"integer","minimum":1e30})").find("$: no integer is within the bounds") == 0);
  CHECK(refusal(R"({"type":"integer","exclusiveMinimum":true})").find("$.exclusiveMinimum: ") == 0);
  CHECK(refusal(R"({"type":"number","maximum":1})").find("$.maximum: \"maximum\" is supported for") == 0);
  CHECK(refusal(R"({"minimum":1})").find("$.minimum: ") == 0);
}
