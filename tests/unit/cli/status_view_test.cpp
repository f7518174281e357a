// What `status` and `watch` print, from a real queue where the daemon's side
// (claim, heartbeat with progress, complete, fail, the workers table) is done
// through the queue interface.
#include <doctest/doctest.h>

#include <string>

#include "daemon/cli/jsonl_submit.h"
#include "daemon/cli/status_view.h"
#include "tests/unit/cli/cli_queue.h"

using namespace ns::cli;

namespace {

ns::jobs::JobSpec spec(const std::string& prompt, int32_t max_tokens, const std::string& batch = "") {
  ns::jobs::JobSpec s;
  s.model = "tiny";
  s.prompt = prompt;
  s.sampling.max_tokens = max_tokens;
  s.batch = batch;
  if (!batch.empty()) s.custom_id = prompt;
  return s;
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

}  // namespace

TEST_CASE("a job's progress: waiting, prefill, decode with tok/s and ETA") {
  ns::jobs::Job job;
  job.spec.sampling.max_tokens = 200;
  job.started_ms = 1'000;
  CHECK(job_progress_text(job, 6'000) == "started 5s ago, waiting for its first progress report");
  job.progress = {.prompt_tokens = 4096, .prefilled = 1024, .generated = 0, .tok_s = 0, .updated_ms = 5'000};
  CHECK(job_progress_text(job, 6'000) == "prefill 1024/4096 prompt tok");
  job.progress = {.prompt_tokens = 4096, .prefilled = 4096, .generated = 37, .tok_s = 3.26, .updated_ms = 5'000};
  CHECK(job_progress_text(job, 6'000) == "37/200 tok, 3.26 tok/s, ETA 50s");
}

TEST_CASE("a daemon is up, stopped, or silent") {
  ns::jobs::WorkerInfo w;
  w.started_ms = 0;
  w.heartbeat_ms = 3'600'000;
  CHECK(worker_state_text(w, 3'605'000) == "up 1h00m");
  CHECK(worker_state_text(w, 3'600'000 + 10 * 60'000) == "silent for 10m00s (crashed or hung?)");
  w.stopped_ms = 3'600'000;
  CHECK(worker_state_text(w, 3'600'000 + 125'000) == "stopped 2m05s ago");
}

TEST_CASE("status shows counts, running jobs with progress, the last finished, batches and daemons") {
  ns::test::CliQueue db;
  auto& q = *db.queue;
  q.submit(spec("first", 10, "nightly"));
  q.submit(spec("second", 200, "nightly"));
  q.submit(spec("third", 50));
  db.finish_next("It was a dark and stormy night", 10);
  auto running = q.claim("host:42", 60'000);
  REQUIRE(running);
  q.heartbeat(running->lease(), 60'000,
              ns::jobs::JobProgress{.prompt_tokens = 12, .prefilled = 12, .generated = 37, .tok_s = 3.26});
  ns::jobs::WorkerInfo w;
  w.id = "host:42";
  w.host = "host";
  w.pid = 42;
  w.model = "tiny";
  w.version = "nightshift 0.1.0";
  q.register_worker(w);
  const int64_t ids[] = {running->id};
  q.worker_heartbeat("host:42", "tiny", ids);

  const StatusSnapshot s = take_status(q, "", 5, 10);
  CHECK(s.counts.queued == 1);
  CHECK(s.counts.running == 1);
  CHECK(s.counts.done == 1);
  REQUIRE(s.running.size() == 1);
  CHECK(s.running[0].progress.generated == 37);

  const std::string plain = format_status(s, StatusStyle{false, 100});
  CHECK(has(plain, "queue: 1 queued, 1 running, 1 done, 0 failed, 0 cancelled, 0 dead"));
  CHECK(has(plain, "job " + std::to_string(running->id) + "  tiny  nightly second  (host:42)"));
  CHECK(has(plain, "37/200 tok, 3.26 tok/s, ETA 50s"));
  CHECK_FALSE(has(plain, "[#"));
  CHECK(has(plain, "last finished:\n  job 1  done"));
  CHECK(has(plain, "10 tok"));
  CHECK(has(plain, "\"It was a dark and stormy night\""));
  CHECK(has(plain, "nightly  1/2 finished"));
  CHECK(has(plain, "host:42  up "));
  CHECK(has(plain, "model tiny  jobs " + std::to_string(running->id)));

  const std::string tty = format_status(s, StatusStyle{true, 100});
  CHECK(has(tty, "decode  [######"));  // 37/200 of a 33-cell bar

  const std::string line = format_status_line(s);
  CHECK(line.find('\n') == std::string::npos);
  CHECK(has(line, "Z 1 queued, 1 running, 1 done"));
  CHECK(has(line, "| job " + std::to_string(running->id) + " 37/200 tok"));

  const nlohmann::json j = status_to_json(s);
  CHECK(j["counts"]["running"] == 1);
  CHECK(j["running"][0]["generated"] == 37);
  CHECK(j["running"][0]["eta_s"].get<double>() == doctest::Approx(163 / 3.26));
  CHECK(j["batches"][0]["name"] == "nightly");
  CHECK(j["workers"][0]["id"] == "host:42");
  CHECK_FALSE(queue_idle(s));
}

TEST_CASE("status of one batch; idle once nothing is queued or running") {
  ns::test::CliQueue db;
  auto& q = *db.queue;
  q.submit(spec("a", 5, "b1"));
  q.submit(spec("b", 5, "b2"));
  db.finish_next("x");
  StatusSnapshot s = take_status(q, "b1", 5, 10);
  CHECK(queue_idle(s));
  CHECK(s.batches.size() == 1);
  CHECK(has(format_status(s, {}), "batch b1: 0 queued, 0 running, 1 done"));
  CHECK(has(format_status(s, {}), "daemons: none has registered"));
  s = take_status(q, "b2", 5, 10);
  CHECK_FALSE(queue_idle(s));
  CHECK(s.recent.empty());
}

TEST_CASE("text from jobs cannot drive the terminal: control characters and bad UTF-8 are neutralised") {
  ns::test::CliQueue db;
  db.queue->submit(spec("line one\nline two \x1b[31mred", 5));
  db.finish_next("ok\x1b[2Jcleared\xff\xfe end\n");
  db.queue->submit(spec("a prompt\twith a tab", 5));
  db.queue->claim("w", 60'000);
  const std::string text = format_status(take_status(*db.queue, "", 5, 10), StatusStyle{true, 100});
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(has(text, "\"ok [2Jcleared\xEF\xBF\xBD\xEF\xBF\xBD end \""));
  CHECK(has(text, "\"a prompt with a tab\""));
}
