// JSON Schema -> GBNF (engine/grammar/grammar.h), for `response_format`
// json_schema requests, and the grammar of JSON mode (any JSON object).
//
// Supported (anything else is refused, see below):
//   type (one or a list), enum, const, {} / true (any JSON value),
//   object: properties, required, additionalProperties false / true / absent
//     (no properties beyond `properties` are generated, which satisfies all three);
//     properties come in `properties` order, each optional one present or not;
//   array: items, minItems, maxItems;  string: minLength, maxLength (in characters), or pattern (a regex subset),
//     or format date, time, date-time, email, uuid (engine/grammar/schema_strings.h says what each allows);
//   number, integer (at most 16 integer digits, 16 decimals, 2 exponent digits: always a finite double), boolean, null;
//   integer bounds minimum, maximum, exclusiveMinimum, exclusiveMaximum (exactly the integers in range; bounds on
//     "number" are refused); format on a non-string type is ignored (int32, float: annotations there);
//   anyOf; oneOf when its alternatives have pairwise different JSON types (else a value
//   could match two, which oneOf forbids: use anyOf); $ref to "#/$defs/NAME" or
//   "#/definitions/NAME" (recursion allowed) and "#" (the root);
//   annotations are ignored: title, description, $schema, $id, $comment, default, examples,
//   deprecated, readOnly, writeOnly.
// Output is JSON text without whitespace before the first or after the last
// character, and at most one space or one newline plus 20 blanks between
// tokens, so a constrained generation ends when its value closes. Strings,
// arrays without maxItems and nested generic values are unbounded: such a
// generation may hit max_tokens before it closes (finish_reason "length").
//
// Contract: throws ns::Error(invalid_input) naming the JSON path of the
// problem and how to fix it, e.g.
//   $.properties.date.format: format "week" is not supported (date, time, ...); remove it (...)
// Deterministic: the same schema (same key order) gives the same text.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace ns::grammar {

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// Parses schema_text (key order kept) and compiles it, remembering the result
// per text hash for the process's life (a batch usually repeats one schema).
// Thread-safe.
std::string json_schema_to_gbnf_cached(std::string_view schema_text);

// JSON mode: any JSON object.
std::string json_object_gbnf();

}  // namespace ns::grammar
