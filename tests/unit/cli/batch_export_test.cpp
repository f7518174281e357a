// export --batch --jsonl on a real queue: finished jobs as OpenAI output
// lines in input order, failures as error lines, unfinished jobs counted and
// left out.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "daemon/cli/batch_export.h"
#include "daemon/cli/jsonl_submit.h"
#include "tests/unit/cli/cli_queue.h"

using namespace ns::cli;
using nlohmann::json;

namespace {

std::vector<json> lines_of(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

// Batch `batch` of model "tiny", read from `source_path`.
JsonlSubmitOptions options(const std::string& batch, const std::string& source_path) {
  return {.batch = batch, .source_path = source_path, .model = "tiny"};
}

std::string request(const std::string& id, bool chat) {
  if (chat) {
    return R"({"custom_id":")" + id +
           R"(","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"Hi"}]}})";
  }
  return R"({"custom_id":")" + id + R"(","method":"POST","url":"/v1/completions","body":{"prompt":"Once"}})";
}

}  // namespace

TEST_CASE("finished jobs become output lines in input order; unfinished ones are counted, not written") {
  ns::test::CliQueue db;
  const JsonlSubmitOptions o = options("b1", "/in.jsonl");
  const std::string file = request("first", false) + "\n" + request("second", true) + "\n" + request("third", false) +
                           "\n" + request("fourth", false) + "\n";
  const JsonlSubmitReport submitted = submit_jsonl(*db.queue, file, o);
  REQUIRE(submitted.created() == 4);
  // Another batch's job must not appear.
  JsonlSubmitOptions other = o;
  other.batch = "b2";
  submit_jsonl(*db.queue, request("x", false) + "\n", other);

  // The daemon's side: claim order is id order at equal priority.
  const int64_t first = db.finish_next("upon a time", 3);
  const int64_t second = db.finish_next("Hello there", 2);
  const int64_t third = db.fail_next("invalid_input", "the prompt is longer than the context");
  db.queue->claim("test-worker", 60'000);  // fourth: running

  std::ostringstream out;
  const ExportCounts c = export_batch_jsonl(*db.queue, "b1", out);
  CHECK(c.states.done == 2);
  CHECK(c.states.failed == 1);
  CHECK(c.states.running == 1);
  CHECK(c.pending() == 1);
  CHECK(c.written == 3);
  CHECK(c.errors == 1);

  const std::vector<json> lines = lines_of(out.str());
  REQUIRE(lines.size() == 3);
  CHECK(lines[0]["custom_id"] == "first");
  CHECK(lines[0]["id"] == "batch_req_" + std::to_string(first));
  CHECK(lines[0]["response"]["body"]["object"] == "text_completion");
  CHECK(lines[0]["response"]["body"]["choices"][0]["text"] == "upon a time");
  CHECK(lines[0]["response"]["body"]["usage"]["completion_tokens"] == 3);
  CHECK(lines[0]["response"]["body"]["model"] == "tiny");
  CHECK(lines[0]["error"].is_null());
  CHECK(lines[1]["custom_id"] == "second");
  CHECK(lines[1]["id"] == "batch_req_" + std::to_string(second));
  CHECK(lines[1]["response"]["body"]["object"] == "chat.completion");
  CHECK(lines[1]["response"]["body"]["choices"][0]["message"]["content"] == "Hello there");
  CHECK(lines[2]["custom_id"] == "third");
  CHECK(lines[2]["id"] == "batch_req_" + std::to_string(third));
  CHECK(lines[2]["response"].is_null());
  CHECK(lines[2]["error"]["code"] == "invalid_input");
  CHECK(lines[2]["error"]["message"] == "the prompt is longer than the context");
  CHECK(describe_counts(c.states) == "2 done, 1 failed, 0 cancelled, 0 dead, 0 queued, 1 running");
}

TEST_CASE("lines come out in the file's order even when jobs were queued out of order") {
  ns::test::CliQueue db;
  const JsonlSubmitOptions o = options("b", "/in.jsonl");
  // Line 2 is invalid at first; fixed and resubmitted, its job comes last in id order.
  std::string file = request("l1", false) + "\n" +
                     R"({"custom_id":"l2","method":"POST","url":"/v1/completions","body":{"prompt":""}})" + "\n" +
                     request("l3", false) + "\n";
  submit_jsonl(*db.queue, file, o);
  file = request("l1", false) + "\n" + request("l2", false) + "\n" + request("l3", false) + "\n";
  CHECK(submit_jsonl(*db.queue, file, o).created() == 1);
  while (db.finish_next("t") != 0) {
  }
  std::ostringstream out;
  export_batch_jsonl(*db.queue, "b", out);
  const std::vector<json> lines = lines_of(out.str());
  REQUIRE(lines.size() == 3);
  CHECK(lines[0]["custom_id"] == "l1");
  CHECK(lines[1]["custom_id"] == "l2");
  CHECK(lines[2]["custom_id"] == "l3");
}

TEST_CASE("cancelled jobs are error lines with code cancelled") {
  ns::test::CliQueue db;
  const JsonlSubmitOptions o = options("b", "");
  const JsonlSubmitReport r = submit_jsonl(*db.queue, request("c", false) + "\n", o);
  db.queue->cancel(r.submitted[0].id);
  std::ostringstream out;
  const ExportCounts c = export_batch_jsonl(*db.queue, "b", out);
  CHECK(c.states.cancelled == 1);
  const json line = json::parse(out.str());
  CHECK(line["error"]["code"] == "cancelled");
  CHECK(line["response"].is_null());
}

// #31: a job cancelled mid-output kept its partial text in the database, and export dropped it.
TEST_CASE("a job cancelled mid-output is exported with its partial response, marked cancelled") {
  ns::test::CliQueue db;
  const JsonlSubmitReport r =
      submit_jsonl(*db.queue, request("p", true) + "\n" + request("q", false) + "\n", options("b", ""));
  auto job = db.queue->claim("test-worker", 60'000);
  REQUIRE(job);
  db.queue->cancel(job->id);
  const ns::jobs::JobResult partial{
      .text = "Hello the", .finish_reason = "cancelled", .prompt_tokens = 5, .completion_tokens = 2};
  REQUIRE(db.queue->finish_cancelled(job->lease(), partial));
  db.queue->cancel(r.submitted[1].id);  // queued: cancelled before any output
  std::ostringstream out;
  const ExportCounts c = export_batch_jsonl(*db.queue, "b", out);
  CHECK(c.states.cancelled == 2);
  CHECK(c.errors == 2);
  const std::vector<json> lines = lines_of(out.str());
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["custom_id"] == "p");
  CHECK(lines[0]["error"]["code"] == "cancelled");
  CHECK(lines[0]["error"]["message"].get<std::string>().find("partial output (2 tokens") != std::string::npos);
  const json& choice = lines[0]["response"]["body"]["choices"][0];
  CHECK(choice["message"]["content"] == "Hello the");
  CHECK(choice["finish_reason"] == "cancelled");
  CHECK(lines[0]["response"]["body"]["usage"]["completion_tokens"] == 2);
  CHECK(lines[1]["custom_id"] == "q");
  CHECK(lines[1]["response"].is_null());
  CHECK(lines[1]["error"]["code"] == "cancelled");
}
