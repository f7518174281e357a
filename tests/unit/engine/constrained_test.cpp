// Constrained decoding end to end: random-weight models sampling under JSON
// schemas over many seeds; every output parses and validates (python3's
// jsonschema, a real validator, where installed), batched equals alone, and a
// resumed run equals an uninterrupted one.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/batch/generation_batch.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/matcher.h"
#include "common/error.h"
#include "tests/unit/engine/test_models.h"

using namespace ns;
using ojson = nlohmann::ordered_json;

namespace {

// Nested objects, required, additionalProperties false, arrays with min/max
// items, enums, numbers, strings with escapes and lengths, anyOf, $ref, const.
const char* const kSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},
        "address":{"type":"object","properties":{"city":{"type":"string","maxLength":10},"zip":{"type":"integer"}},
                   "required":["city"],"additionalProperties":false},
        "active":{"type":"boolean"}},"required":["name","address"],"additionalProperties":false})",
    R"({"type":"object","properties":{
        "tags":{"type":"array","items":{"enum":["red","green","blue",7,null]},"minItems":1,"maxItems":3},
        "matrix":{"type":"array","items":{"type":"array","items":{"type":"number"},"maxItems":2},
                  "minItems":2,"maxItems":2}},
        "required":["tags","matrix"],"additionalProperties":false})",
    R"({"$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"integer"}},
                       "required":["x","y"],"additionalProperties":false}},
        "type":"object","properties":{"quote":{"type":"string","minLength":1,"maxLength":8},"p":{"$ref":"#/$defs/pt"},
        "v":{"anyOf":[{"type":"null"},{"type":"string","maxLength":4},{"type":"number"}]}},
        "required":["quote","p","v"],"additionalProperties":false})",
    R"({"type":"array","items":{"type":"object","properties":{"k":{"const":"x\"y"},"n":{"type":"integer"}},
        "required":["k"],"additionalProperties":false},"minItems":0,"maxItems":3})",
};

SamplingParams constrained(const char* schema, uint64_t seed) {
  SamplingParams p = test::unfiltered(600, seed);
  p.grammar = grammar::json_schema_to_gbnf(ojson::parse(schema));
  return p;
}

std::unique_ptr<Engine> load(const std::string& model, int sequences) {
  return Engine::load(model, {.context = 768, .max_sequences = sequences});
}

// Runs python3's jsonschema over (schema, text) pairs; false with a message when it is not installed.
bool validate_with_python(const std::vector<std::pair<int, std::string>>& outputs) {
  if (std::system("python3 -c 'import jsonschema' > /dev/null 2>&1") != 0) return false;
  const auto dir = std::filesystem::temp_directory_path() / ("ns-constrained-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream schemas(dir / "schemas.json");
    ojson all = ojson::array();
    for (const char* s : kSchemas) all.push_back(ojson::parse(s));
    schemas << all.dump();
    std::ofstream out(dir / "outputs.jsonl");
    for (const auto& [i, text] : outputs) out << ojson{{"schema", i}, {"text", text}}.dump() << "\n";
  }
  const std::string script = R"(
import json, sys, jsonschema
d = sys.argv[1]
schemas = json.load(open(d + "/schemas.json"))
bad = 0
for line in open(d + "/outputs.jsonl"):
    o = json.loads(line)
    try:
        jsonschema.validate(json.loads(o["text"]), schemas[o["schema"]])
    except Exception as e:
        bad += 1
        print("invalid:", o["schema"], repr(o["text"]), str(e).splitlines()[0])
print("validated", sum(1 for _ in open(d + "/outputs.jsonl")), "bad", bad)
sys.exit(1 if bad else 0)
)";
  {
    std::ofstream py(dir / "check.py");
    py << script;
  }
  const int rc = std::system(("python3 " + (dir / "check.py").string() + " " + dir.string()).c_str());
  std::filesystem::remove_all(dir);
  CHECK(rc == 0);
  return true;
}

}  // namespace

TEST_CASE("constrained: every output of random models under JSON schemas parses and validates") {
  std::vector<std::pair<int, std::string>> outputs;
  for (const std::string& model : {test::moe_model(), test::kimi_linear_model()}) {
    auto e = load(model, 4);
    std::vector<GenerationRequest> requests;
    std::vector<int> schema_of;
    for (int s = 0; s < static_cast<int>(std::size(kSchemas)); ++s)
      for (uint64_t seed = 0; seed < 8; ++seed) {
        requests.push_back({"Extract the record as JSON:", constrained(kSchemas[s], seed), {}, {}, {}, {}});
        schema_of.push_back(s);
      }
    auto batch = e->open_batch();
    const std::vector<GenerationResult> results = test::run_batch(*batch, requests);
    MESSAGE(model << ": grammar masks took " << batch->grammar_seconds() * 1e3 << " ms");
    for (size_t i = 0; i < results.size(); ++i) {
      const GenerationResult& r = results[i];
      CAPTURE(r.text);
      CHECK(r.finish_reason == "stop");  // the grammar closed the value well before max_tokens
      const grammar::Grammar g = grammar::parse_gbnf(requests[i].params.grammar);
      grammar::Matcher m(g);
      CHECK(m.accept_bytes(r.text));
      CHECK(m.complete());
      CHECK(nlohmann::json::accept(r.text));
      outputs.emplace_back(schema_of[i], r.text);
    }
  }
  if (!validate_with_python(outputs)) MESSAGE("python3 jsonschema not installed: outputs only parsed, not validated");
}

TEST_CASE("constrained: batched equals alone, and a resumed run equals an uninterrupted one") {
  auto e = load(test::moe_model(), 3);
  std::vector<GenerationRequest> requests;
  for (int s = 0; s < 3; ++s)
    for (uint64_t seed = 40; seed < 42; ++seed)
      requests.push_back({"JSON please:", constrained(kSchemas[s], seed), {}, {}, {}, {}});
  std::vector<GenerationResult> alone;
  for (const GenerationRequest& r : requests) alone.push_back(e->generate(r.prompt, r.params));
  auto batch = e->open_batch();
  const std::vector<GenerationResult> together = test::run_batch(*batch, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    CAPTURE(i);
    CHECK(together[i].tokens == alone[i].tokens);
    CHECK(together[i].text == alone[i].text);
    REQUIRE(alone[i].tokens.size() > 4);
    // Interrupted after half its tokens: the replay is fed to the grammar too.
    const std::vector<int32_t> half(alone[i].tokens.begin(), alone[i].tokens.begin() + alone[i].tokens.size() / 2);
    const GenerationResult resumed = e->generate(requests[i].prompt, requests[i].params, {}, half);
    CHECK(resumed.tokens == alone[i].tokens);
    CHECK(resumed.text == alone[i].text);
    // Resumed with every token: nothing more may follow, it finishes at once.
    const GenerationResult full = e->generate(requests[i].prompt, requests[i].params, {}, alone[i].tokens);
    CHECK(full.text == alone[i].text);
    CHECK(full.finish_reason == "stop");
  }
}

TEST_CASE("constrained: a bad grammar fails its request alone; an unconstrained neighbour runs") {
  auto e = load(test::moe_model(), 2);
  SamplingParams bad{.grammar = "root ::= undefined-rule"};
  CHECK_THROWS_WITH_AS(e->generate("x", bad), doctest::Contains("'undefined-rule' is used but never defined"), Error);
  auto batch = e->open_batch();
  CHECK_THROWS_AS(batch->add({"x", bad, {}, {}, {}, {}}), Error);
  CHECK(batch->active() == 0);
  SamplingParams plain{.max_tokens = 4, .ignore_eos = true};
  batch->add({"x", plain, {}, {}, {}, {}});
  while (batch->step()) {
  }
  CHECK(batch->take_finished().size() == 1);
  SamplingParams both = constrained(kSchemas[0], 1);
  both.ignore_eos = true;
  CHECK_THROWS_WITH_AS(e->generate("x", both), doctest::Contains("ignore_eos cannot be combined"), Error);
  // A checkpoint the grammar rejects is refused, not replayed.
  const SamplingParams p = constrained(kSchemas[0], 1);
  const int32_t close_brace = static_cast<int32_t>(e->generate("x", p).tokens.back());
  CHECK_THROWS_WITH_AS(e->generate("x", p, {}, {close_brace}), doctest::Contains("does not follow the job's grammar"),
                       Error);
}
