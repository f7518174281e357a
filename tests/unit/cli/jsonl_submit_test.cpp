// submit --jsonl on a real queue: valid lines become jobs with their batch,
// custom_id, provenance and messages; invalid ones are reported by line and
// do not stop the rest; submitting again adds nothing; a changed request
// under a used custom_id is refused.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "daemon/cli/jsonl_submit.h"
#include "tests/unit/cli/cli_queue.h"

using namespace ns::cli;

namespace {

const std::string kFile =
    R"({"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"model": "k2", "prompt": "Once upon", "max_tokens": 7, "temperature": 0}})"
    "\n"
    R"({"custom_id": "b", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "seed": 9, "stop": ["\n"]}})"
    "\n\n"
    R"({"custom_id": "c", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x", "max_tokens": 0}})"
    "\n"
    R"({"custom_id": "d", "method": "POST", "url": "/v1/completions", "body": {"prompt": "Dear diary", "top_p": 0.5}})"
    "\n"
    "{not json\n";

JsonlSubmitOptions options(const std::string& model = "tiny") {
  JsonlSubmitOptions o{.batch = "reviews", .source_path = "/data/reviews.jsonl", .model = model};
  o.defaults.max_tokens = 50;
  o.priority = 2;
  return o;
}

}  // namespace

TEST_CASE("valid lines are queued in a named batch; invalid ones are reported by line") {
  ns::test::CliQueue db;
  const JsonlSubmitReport r = submit_jsonl(*db.queue, kFile, options());
  CHECK(r.lines == 5);
  REQUIRE(r.submitted.size() == 3);
  CHECK(r.created() == 3);
  REQUIRE(r.rejected.size() == 2);
  CHECK(r.rejected[0].line == 4);
  CHECK(r.rejected[0].custom_id == "c");
  CHECK(r.rejected[0].message.find("max_tokens") != std::string::npos);
  CHECK(r.rejected[1].line == 6);
  CHECK(r.rejected[1].message.find("JSON") != std::string::npos);

  const auto a = db.queue->get(r.submitted[0].id);
  REQUIRE(a);
  CHECK(a->spec.batch == "reviews");
  CHECK(a->spec.custom_id == "a");
  CHECK(a->spec.source_path == "/data/reviews.jsonl");
  CHECK(a->spec.source_line == 1);
  CHECK(a->spec.model == "tiny");  // --model runs every line, whatever body.model says
  CHECK(a->spec.prompt == "Once upon");
  CHECK(a->spec.sampling.max_tokens == 7);
  CHECK(a->spec.sampling.temperature == 0);
  CHECK(a->spec.priority == 2);
  CHECK(a->spec.idempotency_key.starts_with("jsonl:reviews:a:"));

  const auto b = db.queue->get(r.submitted[1].id);
  REQUIRE(b);
  CHECK(b->spec.is_chat());
  CHECK(b->spec.prompt.empty());
  CHECK(nlohmann::json::parse(b->spec.messages) ==
        nlohmann::json::parse(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}])"));
  CHECK(b->spec.source_line == 2);
  CHECK(b->spec.sampling.max_tokens == 50);  // left out: the command's default
  CHECK(b->spec.sampling.seed == 9);
  CHECK(b->spec.sampling.stop == std::vector<std::string>{"\n"});

  CHECK(db.queue->get(r.submitted[2].id)->spec.source_line == 5);
  CHECK(db.queue->counts("reviews").queued == 3);
}

TEST_CASE("submitting the same file again queues nothing twice; fixed lines are added") {
  ns::test::CliQueue db;
  const JsonlSubmitReport first = submit_jsonl(*db.queue, kFile, options());
  const JsonlSubmitReport again = submit_jsonl(*db.queue, kFile, options());
  CHECK(again.created() == 0);
  REQUIRE(again.submitted.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(again.submitted[i].id == first.submitted[i].id);
  CHECK(again.rejected.size() == 2);

  std::string fixed = kFile;
  fixed.replace(fixed.find("\"max_tokens\": 0"), 15, "\"max_tokens\": 4");
  const JsonlSubmitReport third = submit_jsonl(*db.queue, fixed, options());
  CHECK(third.created() == 1);
  CHECK(third.submitted.size() == 4);
  CHECK(db.queue->counts("reviews").queued == 4);

  // The same file as another batch is new work.
  JsonlSubmitOptions other = options();
  other.batch = "reviews-2";
  CHECK(submit_jsonl(*db.queue, kFile, other).created() == 3);
}

TEST_CASE("a changed request under a custom_id the batch already holds is refused, the rest go on") {
  ns::test::CliQueue db;
  submit_jsonl(*db.queue, kFile, options());
  std::string changed = kFile;
  changed.replace(changed.find("Once upon"), 9, "Twice upon");
  const JsonlSubmitReport r = submit_jsonl(*db.queue, changed, options());
  CHECK(r.created() == 0);
  REQUIRE(r.rejected.size() == 3);
  CHECK(r.rejected[0].line == 1);
  CHECK(r.rejected[0].message.find("custom_id \"a\" is already job") != std::string::npos);
  CHECK(r.rejected[0].message.find("new custom_id") != std::string::npos);
  // Other sampling defaults change what a line asks for too.
  JsonlSubmitOptions hotter = options();
  hotter.defaults.temperature = 1.5f;
  CHECK(submit_jsonl(*db.queue, kFile, hotter).rejected.size() == 4);  // b and d take the default; a says 0
  CHECK(db.queue->counts("reviews").queued == 3);
}

TEST_CASE("the model: body.model, unless --model; a line without either is refused") {
  ns::test::CliQueue db;
  const JsonlSubmitReport r = submit_jsonl(*db.queue, kFile, options(""));
  REQUIRE(r.submitted.size() == 1);
  CHECK(db.queue->get(r.submitted[0].id)->spec.model == "k2");
  REQUIRE(r.rejected.size() == 4);
  CHECK(r.rejected[0].line == 2);
  CHECK(r.rejected[0].message.find("--model") != std::string::npos);
}

TEST_CASE("fingerprints and batch names") {
  ns::jobs::JobSpec s;
  s.model = "m";
  s.prompt = "p";
  const std::string fp = spec_fingerprint(s);
  CHECK(fp.size() == 64);
  ns::jobs::JobSpec t = s;
  t.sampling.seed = 1;
  CHECK(spec_fingerprint(t) != fp);
  t = s;
  t.prompt = "";
  t.messages = "p";
  CHECK(spec_fingerprint(t) != fp);  // a prompt is not the same input as messages with the same bytes
  t = s;
  t.priority = 9;
  t.batch = "x";
  CHECK(spec_fingerprint(t) == fp);  // only what changes the output counts
  CHECK(batch_name_from_path("data/reviews-0412.jsonl") == "reviews-0412");
  CHECK(batch_name_from_path("/tmp/q.v2.jsonl") == "q.v2");
  CHECK(batch_name_from_path("plain") == "plain");
}

// Issue #31: a resubmission says what it found, and a file whose only change
// is the model points at `retry --model`; after that command the file matches.
TEST_CASE("a resubmission reports the state of what it found; a model-only change names retry --model") {
  ns::test::CliQueue db;
  const std::string two = R"({"custom_id": "x", "method": "POST", "url": "/v1/completions", )"
                          R"("body": {"model": "chta", "prompt": "one", "max_tokens": 4}})"
                          "\n"
                          R"({"custom_id": "y", "method": "POST", "url": "/v1/completions", )"
                          R"("body": {"model": "chta", "prompt": "two", "max_tokens": 4}})"
                          "\n";
  const JsonlSubmitReport first = submit_jsonl(*db.queue, two, options(""));
  REQUIRE(first.created() == 2);
  db.finish_next("done text");
  db.fail_next("model_error", "no such model");
  const JsonlSubmitReport again = submit_jsonl(*db.queue, two, options(""));
  REQUIRE(again.submitted.size() == 2);
  CHECK(again.submitted[0].state == "done");
  CHECK(again.submitted[1].state == "failed");

  // The corrected file: only body.model differs from the failed job.
  std::string fixed = two;
  for (size_t at; (at = fixed.find("chta")) != std::string::npos;) fixed.replace(at, 4, "chat");
  const JsonlSubmitReport corrected = submit_jsonl(*db.queue, fixed, options(""));
  CHECK(corrected.created() == 0);
  REQUIRE(corrected.rejected.size() == 2);  // x: done under another model (other content); y: failed
  CHECK(corrected.rejected[0].message.find("with other content") != std::string::npos);
  CHECK(corrected.rejected[1].message.find("only the model differs from the batch's failed job") != std::string::npos);
  CHECK(corrected.rejected[1].message.find("nightshift retry --batch reviews --model chat") != std::string::npos);

  // After that command the job asks what the corrected line asks: the file matches it.
  REQUIRE(db.queue->retry(first.submitted[1].id, "chat") == ns::jobs::RetryOutcome::requeued);
  const JsonlSubmitReport after = submit_jsonl(*db.queue, fixed, options(""));
  REQUIRE(after.submitted.size() == 1);
  CHECK(after.submitted[0].id == first.submitted[1].id);
  CHECK_FALSE(after.submitted[0].created);
  CHECK(after.submitted[0].state == "queued");
}

TEST_CASE("a line's check is asked only for new work; a body.model problem suggests --model") {
  ns::test::CliQueue db;
  JsonlSubmitOptions o = options("");
  int asked = 0;
  o.check = [&](const ns::jobs::JobSpec& spec) {
    ++asked;
    return spec.model == "k2" ? std::string() : "model '" + spec.model + "' is not under models:";
  };
  const std::string file =
      R"({"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"model": "k2", "prompt": "one"}})"
      "\n"
      R"({"custom_id": "b", "method": "POST", "url": "/v1/completions", )"
      R"("body": {"model": "gpt-4o-mini", "prompt": "two"}})"
      "\n";
  const JsonlSubmitReport r = submit_jsonl(*db.queue, file, o);
  CHECK(asked == 2);
  REQUIRE(r.rejected.size() == 1);
  CHECK(r.rejected[0].message.find("--model NAME runs every line on that model") != std::string::npos);
  asked = 0;
  submit_jsonl(*db.queue, file, o);
  CHECK(asked == 1);  // "a" is in the batch already
}

TEST_CASE("the report says each reason once, with its lines") {
  std::vector<BatchLineError> errors;
  for (int64_t line : {1, 2, 3, 5, 9, 10}) errors.push_back({line, "c" + std::to_string(line), "bad model"});
  errors.push_back({4, "c4", "bad JSON"});
  const std::vector<std::string> said = describe_once(errors);
  REQUIRE(said.size() == 2);
  CHECK(said[0] == "lines 1-3, 5, 9-10 (6 lines): bad model");
  CHECK(said[1] == "line 4 (custom_id \"c4\"): bad JSON");
  std::vector<BatchLineError> many;
  for (int64_t line = 1; line <= 500; line += 2) many.push_back({line, "", "same"});
  const std::vector<std::string> once = describe_once(many);
  REQUIRE(once.size() == 1);
  CHECK(once[0] == "lines 1, 3, 5, 7, 9, 11, ... (250 lines): same");
}
