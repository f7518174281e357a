// The batch object's life and shape: plan_batch() over the counts of its
// jobs, the request counts, the times each status sets, and the JSON fields
// OpenAI's Batch and FileObject declare.
#include <doctest/doctest.h>

#include <string>

#include "common/error.h"
#include "daemon/http/batch_object.h"

using namespace ns::http;
using ns::jobs::ApiBatch;
using ns::jobs::QueueCounts;

namespace {

ApiBatch running_batch() {
  ApiBatch b;
  b.id = "batch_x";
  b.endpoint = "/v1/completions";
  b.input_file_id = "file-x";
  b.completion_window = "24h";
  b.status = "in_progress";
  b.total = 5;
  b.rejected = 1;
  b.created_at = 1000;
  b.in_progress_at = 1001;
  b.expires_at = 1000 + 86400;
  return b;
}

QueueCounts counts(int64_t queued, int64_t running, int64_t done, int64_t failed, int64_t cancelled) {
  QueueCounts c;
  c.queued = queued;
  c.running = running;
  c.done = done;
  c.failed = failed;
  c.cancelled = cancelled;
  return c;
}

}  // namespace

TEST_CASE("plan_batch: in_progress until every job ended, then finish") {
  const ApiBatch b = running_batch();
  CHECK(plan_batch(b, counts(2, 1, 1, 0, 0), 2000).step == BatchStep::none);
  CHECK(plan_batch(b, counts(0, 1, 3, 0, 0), 2000).step == BatchStep::none);
  const BatchPlan done = plan_batch(b, counts(0, 0, 3, 1, 0), 2000);
  CHECK(done.step == BatchStep::finish);
  CHECK(done.final_status == "completed");
  ApiBatch finalizing = b;
  finalizing.status = "finalizing";  // a finalizer that died: anyone finishes it
  CHECK(plan_batch(finalizing, counts(0, 0, 4, 0, 0), 2000).final_status == "completed");
}

TEST_CASE("plan_batch: a passed window cancels the unfinished jobs, then the batch is expired") {
  const ApiBatch b = running_batch();
  const int64_t late = b.expires_at + 1;
  CHECK(plan_batch(b, counts(2, 1, 1, 0, 0), late).step == BatchStep::cancel_jobs);
  const BatchPlan p = plan_batch(b, counts(0, 0, 1, 0, 3), late);
  CHECK(p.step == BatchStep::finish);
  CHECK(p.final_status == "expired");
  // Every job finished in time, looked at late: completed, not expired.
  CHECK(plan_batch(b, counts(0, 0, 4, 0, 0), late).final_status == "completed");
}

TEST_CASE("plan_batch: cancelling cancels until every job ended; final and validating batches wait") {
  ApiBatch b = running_batch();
  b.status = "cancelling";
  CHECK(plan_batch(b, counts(1, 1, 0, 0, 2), 2000).step == BatchStep::cancel_jobs);
  const BatchPlan p = plan_batch(b, counts(0, 0, 1, 0, 3), 2000);
  CHECK(p.step == BatchStep::finish);
  CHECK(p.final_status == "cancelled");
  for (const char* s : {"validating", "completed", "failed", "cancelled", "expired"}) {
    b.status = s;
    CHECK_MESSAGE(plan_batch(b, counts(0, 0, 4, 0, 0), b.expires_at + 10).step == BatchStep::none, s);
  }
}

TEST_CASE("request_counts: live from the jobs, refused lines failed; stored once final") {
  ApiBatch b = running_batch();
  QueueCounts c = counts(1, 1, 1, 0, 0);
  c.dead = 1;
  RequestCounts r = request_counts(b, c);
  CHECK(r.total == 5);
  CHECK(r.completed == 1);
  CHECK(r.failed == 2);  // 1 refused + 1 dead
  b.status = "completed";
  b.completed = 3;
  b.failed = 2;
  r = request_counts(b, counts(0, 0, 9, 9, 9));  // a job retried by hand later does not change an ended batch
  CHECK(r.completed == 3);
  CHECK(r.failed == 2);
}

TEST_CASE("set_status sets the status's time; completed gets finalizing_at too") {
  ApiBatch b = running_batch();
  set_status(b, "cancelling", 50);
  CHECK(b.cancelling_at == 50);
  set_status(b, "cancelled", 60);
  CHECK(b.cancelled_at == 60);
  CHECK(b.status == "cancelled");
  ApiBatch c = running_batch();
  set_status(c, "completed", 70);
  CHECK(c.completed_at == 70);
  CHECK(c.finalizing_at == 70);
  ApiBatch f = running_batch();
  set_status(f, "failed", 80);
  CHECK(f.failed_at == 80);
  set_status(f, "expired", 90);
  CHECK(f.expired_at == 90);
}

TEST_CASE("batch_json: every field of OpenAI's Batch, null where it does not apply") {
  ApiBatch b = running_batch();
  b.model = "tiny";
  b.metadata = R"({"run":"nightly"})";
  b.errors = rejected_to_json({{3, "c", "model_not_found", "unknown model 'x'", "body.model"}});
  nlohmann::ordered_json j = batch_json(b, counts(2, 1, 1, 0, 0));
  for (const char* key : {"id",
                          "object",
                          "endpoint",
                          "model",
                          "errors",
                          "input_file_id",
                          "completion_window",
                          "status",
                          "output_file_id",
                          "error_file_id",
                          "created_at",
                          "in_progress_at",
                          "expires_at",
                          "finalizing_at",
                          "completed_at",
                          "failed_at",
                          "expired_at",
                          "cancelling_at",
                          "cancelled_at",
                          "request_counts",
                          "metadata"}) {
    CHECK_MESSAGE(j.contains(key), key);
  }
  CHECK(j["object"] == "batch");
  CHECK(j["status"] == "in_progress");
  CHECK(j["output_file_id"].is_null());
  CHECK(j["completed_at"].is_null());
  CHECK(j["in_progress_at"] == 1001);
  CHECK(j["metadata"]["run"] == "nightly");
  CHECK(j["errors"]["object"] == "list");
  CHECK(j["errors"]["data"][0]["line"] == 3);
  CHECK(j["errors"]["data"][0]["param"] == "body.model");
  CHECK_FALSE(j["errors"]["data"][0].contains("custom_id"));  // kept for the error file, not part of BatchError
  CHECK(j["request_counts"] == nlohmann::ordered_json({{"total", 5}, {"completed", 1}, {"failed", 1}}));
  CHECK_FALSE(j.contains("usage"));  // only once the batch has ended

  b.status = "completed";
  b.completed = 4;
  b.input_tokens = 40;
  b.output_tokens = 12;
  b.cached_tokens = 8;
  j = batch_json(b, {});
  CHECK(j["usage"]["total_tokens"] == 52);
  CHECK(j["usage"]["input_tokens_details"]["cached_tokens"] == 8);
  CHECK(j["usage"]["output_tokens_details"]["reasoning_tokens"] == 0);
  b.errors = "";
  b.metadata = "";
  j = batch_json(b, {});
  CHECK(j["errors"].is_null());
  CHECK(j["metadata"].is_null());
}

TEST_CASE("file_json: OpenAI's FileObject") {
  const nlohmann::ordered_json j = file_json({"file-1", "in.jsonl", "batch", 42, 1234, ""});
  CHECK(j["object"] == "file");
  CHECK(j["bytes"] == 42);
  CHECK(j["status"] == "processed");
  CHECK(j["purpose"] == "batch");
  CHECK(j["filename"] == "in.jsonl");
}

TEST_CASE("completion_window and metadata are checked") {
  CHECK(completion_window_seconds("24h") == 86400);
  CHECK(completion_window_seconds("1h") == 3600);
  CHECK(completion_window_seconds("720h") == 720 * 3600);
  for (const char* bad : {"", "h", "0h", "721h", "24", "1d", "-1h", "2.5h", "24H"}) {
    CHECK_THROWS_AS_MESSAGE(completion_window_seconds(bad), ns::Error, bad);
  }
  CHECK(metadata_problem(nullptr).empty());
  CHECK(metadata_problem({{"a", "b"}}).empty());
  CHECK_FALSE(metadata_problem({{"a", 1}}).empty());
  CHECK_FALSE(metadata_problem(nlohmann::json::array()).empty());
  nlohmann::json many;
  for (int i = 0; i < 17; ++i) many["k" + std::to_string(i)] = "v";
  CHECK_FALSE(metadata_problem(many).empty());
  CHECK_FALSE(metadata_problem({{std::string(65, 'k'), "v"}}).empty());
  CHECK_FALSE(metadata_problem({{"k", std::string(513, 'v')}}).empty());
}

TEST_CASE("refused lines round-trip and become error-file lines") {
  const std::vector<RejectedLine> lines = {{2, "b", "model_not_found", "unknown model 'gpt-x'", "body.model"},
                                           {5, "e", "invalid_request", "no chat template", ""}};
  const std::vector<RejectedLine> back = rejected_from_json(rejected_to_json(lines));
  REQUIRE(back.size() == 2);
  CHECK(back[1].line == 5);
  CHECK(back[1].custom_id == "e");
  CHECK(back[0].param == "body.model");
  const nlohmann::json line = nlohmann::json::parse(rejected_output_line("batch_9", lines[0]));
  CHECK(line["id"] == "batch_req_batch_9_line2");
  CHECK(line["custom_id"] == "b");
  CHECK(line["response"].is_null());
  CHECK(line["error"]["code"] == "model_not_found");
  CHECK(rejected_to_json({}).empty());
}
