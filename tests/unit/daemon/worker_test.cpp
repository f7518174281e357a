// The worker loop on a real queue file and real models from the shared folder:
// results and stats, failures that do not stop the worker, cancellation and
// shutdown in the middle of a generation, the engine cache.
#include <doctest/doctest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "daemon/lib/worker.h"
#include "jobs/queue.h"
#include "jobs/sqlite_db.h"
#include "jobs/sqlite_queue.h"
#include "tests/unit/jobs/fast_queue.h"
#include "tests/unit/jobs/temp_dir.h"

using namespace ns;
using jobs::JobState;

namespace {

const std::string kLlama = std::string(NS_SHARED_DIR) + "/models/tiny-llama-spm-q8_0.gguf";
const std::string kMixtral = std::string(NS_SHARED_DIR) + "/models/tiny-mixtral-bpe-q4_0.gguf";

bool have_models() {
  if (std::filesystem::exists(kLlama) && std::filesystem::exists(kMixtral)) return true;
  MESSAGE("skipping: shared models not found under " << NS_SHARED_DIR);
  return false;
}

struct Fixture {
  test::TempDir dir;
  std::string db_path = dir.file("q.db");
  std::unique_ptr<jobs::Queue> queue = jobs::open_sqlite_queue(db_path, test::kFastCommits);
  std::atomic<bool> stop{false};
  daemon::WorkerOptions options;

  Fixture() {
    spdlog::set_level(spdlog::level::err);  // the worker's info lines would drown the test output
    options.worker_id = "test-worker";
    options.models = {{"llama", kLlama}, {"mixtral", kMixtral}};
    options.config_source = "test-config.yaml";
    options.engine.threads = 2;
    options.engine.context = 256;
    options.poll_interval_ms = 10;
    options.retry_backoff = {0, 0};  // transient failures are retried at once
  }

  int64_t submit(const std::string& model, int max_tokens = 8, const std::string& prompt = "Once upon a time") {
    return queue->submit(test::generation_spec(model, prompt, max_tokens)).id;
  }
  jobs::Job job(int64_t id) { return *queue->get(id); }
};

}  // namespace

TEST_CASE("a job runs to done with its text and every stat; the engine stays loaded") {
  if (!have_models()) return;
  Fixture f;
  const int64_t first = f.submit("llama", 12);
  const int64_t second = f.submit("llama", 5);
  daemon::Worker worker(*f.queue, f.options, f.stop);

  CHECK(worker.run_next() == daemon::JobOutcome::done);
  jobs::Job j = f.job(first);
  CHECK(j.state == JobState::done);
  CHECK(j.worker == "test-worker");
  REQUIRE(j.result);
  const jobs::JobResult& r = *j.result;
  CHECK_FALSE(r.text.empty());
  CHECK(r.finish_reason == "length");
  CHECK(r.completion_tokens == 12);
  CHECK(r.prompt_tokens > 0);
  CHECK(r.queue_wait_ms == static_cast<double>(j.started_ms - j.created_ms));
  CHECK(r.load_ms > 0);
  CHECK(r.prefill_ms > 0);
  CHECK(r.decode_ms > 0);
  CHECK(r.prefill_tok_s > 0);
  CHECK(r.decode_tok_s > 0);
  CHECK(r.peak_rss_bytes > 0);
  CHECK(worker.loaded_model() == "llama");

  CHECK(worker.run_next() == daemon::JobOutcome::done);
  j = f.job(second);
  REQUIRE(j.result);
  CHECK(j.result->completion_tokens == 5);
  CHECK(j.result->load_ms == 0);  // same model: no reload

  CHECK(worker.run_next() == daemon::JobOutcome::none_queued);
}

TEST_CASE(
    "jobs that cannot run fail with a kind and a message (or, for the daemon's config, wait); the worker carries on") {
  if (!have_models()) return;
  Fixture f;
  const std::string corrupt = f.dir.file("corrupt.gguf");
  {
    // A whole real model whose header names GGUF version 99: corrupt, not cut short (a cut file is held).
    std::ifstream in(kLlama, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    bytes[4] = 99;
    std::ofstream(corrupt, std::ios::binary) << bytes;
  }
  f.options.models["corrupt"] = corrupt;
  f.options.models["missing"] = f.dir.file("nothere.gguf");  // the daemon's config: the job waits
  // Held for the whole drain: the hold is 1 s at least, which the three other jobs outlast on a slow engine (TSan).
  f.options.retry_backoff = {600'000, 600'000};

  const int64_t unknown = f.submit("no-such-model");
  const int64_t missing = f.submit("missing");
  const int64_t bad_file = f.submit("corrupt");
  const int64_t bad_params = f.submit("llama");
  const int64_t good = f.submit("llama");
  {
    // Rows edited by hand (or written by an older client) are checked again by the worker.
    jobs::sqlite::Db db(f.db_path);
    db.exec("UPDATE jobs SET temperature = -1 WHERE id = " + std::to_string(bad_params));
  }

  daemon::Worker worker(*f.queue, f.options, f.stop);
  // `unknown` and `missing` go back to the queue (the daemon's config lacks
  // the model, or its file: not the jobs' end).
  CHECK(worker.run(/*drain=*/true) == 3);
  CHECK(worker.left_held());

  jobs::Job j = f.job(unknown);
  CHECK(j.state == JobState::queued);
  CHECK(j.attempts == 0);
  const std::vector<jobs::AttemptRecord> tried = f.queue->attempts(unknown);
  REQUIRE(tried.size() == 1);
  CHECK(tried[0].error_kind == "daemon_config");
  CHECK_MESSAGE(tried[0].error.find("model 'no-such-model' is not in the daemon's config") != std::string::npos,
                tried[0].error);
  CHECK_MESSAGE(tried[0].error.find("corrupt, llama, missing, mixtral") != std::string::npos, tried[0].error);
  CHECK_MESSAGE(tried[0].error.find("test-config.yaml") != std::string::npos, tried[0].error);
  CHECK_FALSE(j.result);

  j = f.job(missing);
  CHECK(j.state == JobState::queued);
  CHECK(j.attempts == 0);
  REQUIRE(f.queue->attempts(missing).size() == 1);
  CHECK(f.queue->attempts(missing)[0].error_kind == "daemon_config");
  CHECK_MESSAGE(f.queue->attempts(missing)[0].error.find("nothere.gguf") != std::string::npos,
                f.queue->attempts(missing)[0].error);

  j = f.job(bad_file);
  CHECK(j.state == JobState::failed);
  CHECK(j.attempts == 1);  // permanent: not retried
  CHECK(j.error_kind == "bad_model");
  CHECK_MESSAGE(j.error.find("corrupt.gguf") != std::string::npos, j.error);

  j = f.job(bad_params);
  CHECK(j.state == JobState::failed);
  CHECK(j.error_kind == "invalid_input");
  CHECK_MESSAGE(j.error.find("temperature") != std::string::npos, j.error);

  CHECK(f.job(good).state == JobState::done);
}

TEST_CASE("a job naming another model swaps the loaded engine") {
  if (!have_models()) return;
  Fixture f;
  const int64_t a = f.submit("llama", 3);
  const int64_t b = f.submit("mixtral", 3);
  const int64_t c = f.submit("mixtral", 3);
  const int64_t d = f.submit("llama", 3);
  daemon::Worker worker(*f.queue, f.options, f.stop);
  CHECK(worker.run_next() == daemon::JobOutcome::done);
  CHECK(worker.loaded_model() == "llama");
  CHECK(worker.run_next() == daemon::JobOutcome::done);
  CHECK(worker.loaded_model() == "mixtral");
  CHECK(worker.run_next() == daemon::JobOutcome::done);
  CHECK(worker.run_next() == daemon::JobOutcome::done);
  CHECK(worker.loaded_model() == "llama");
  CHECK(f.job(a).result->load_ms > 0);
  CHECK(f.job(b).result->load_ms > 0);
  CHECK(f.job(c).result->load_ms == 0);
  CHECK(f.job(d).result->load_ms > 0);
}

TEST_CASE("nightshift cancel on a running job ends it cancelled with the partial text") {
  if (!have_models()) return;
  Fixture f;
  f.options.cancel_poll_ms = 0;  // check on every token so the test is exact
  const int64_t id = f.submit("llama", 200);
  auto other_process = jobs::open_sqlite_queue(f.db_path, test::kFastCommits);  // as `nightshift cancel` would

  daemon::Worker worker(*f.queue, f.options, f.stop);
  int cancelled_at = -1;
  worker.set_progress_observer([&](const jobs::Job& job, const GenerationProgress& p) {
    if (p.generated == 4 && cancelled_at < 0) {
      CHECK(other_process->cancel(job.id));
      cancelled_at = p.generated;
    }
  });
  CHECK(worker.run_next() == daemon::JobOutcome::cancelled);
  jobs::Job j = f.job(id);
  CHECK(j.state == JobState::cancelled);
  CHECK(j.finished_ms > 0);
  REQUIRE(j.result);
  CHECK(j.result->finish_reason == "cancelled");
  CHECK(j.result->completion_tokens == 5);  // noticed at the next token
  CHECK_FALSE(j.result->text.empty());
}

TEST_CASE("a stop request mid-generation checkpoints the job and puts it back in the queue") {
  if (!have_models()) return;
  Fixture f;
  f.options.checkpoint_tokens = 0;  // only the final checkpoint at the stop
  f.options.checkpoint_interval_ms = 0;
  const int64_t id = f.submit("llama", 200);
  const int64_t next = f.submit("llama", 3);
  daemon::Worker worker(*f.queue, f.options, f.stop);
  worker.set_progress_observer([&](const jobs::Job&, const GenerationProgress& p) {
    if (p.generated == 3) f.stop = true;  // what the SIGTERM handler does
  });
  CHECK(worker.run(/*drain=*/false) == 1);  // returns once stopped
  jobs::Job j = f.job(id);
  CHECK(j.state == JobState::queued);
  CHECK(j.attempts == 0);
  CHECK(j.worker.empty());
  CHECK_FALSE(j.result);
  CHECK(f.job(next).state == JobState::queued);
  std::optional<jobs::Checkpoint> cp = f.queue->checkpoint(id);
  REQUIRE(cp);
  CHECK(cp->tokens.size() == 4);  // noticed at the next token
  CHECK(f.queue->attempts(id)[0].outcome == "released");

  // The next daemon resumes it from the checkpoint.
  f.stop = false;
  daemon::Worker again(*f.queue, f.options, f.stop);
  CHECK(again.run(/*drain=*/true) == 2);
  j = f.job(id);
  CHECK(j.state == JobState::done);
  CHECK(j.attempts == 1);
  CHECK(j.result->completion_tokens == 200);
  CHECK(f.queue->attempts(id)[1].resumed_tokens == 4);
}

TEST_CASE("a stopped worker claims nothing; drain returns when the queue is empty") {
  Fixture f;
  f.submit("llama");
  f.stop = true;
  daemon::Worker stopped(*f.queue, f.options, f.stop);
  CHECK(stopped.run(/*drain=*/false) == 0);
  CHECK(f.queue->counts().queued == 1);

  f.stop = false;
  test::TempDir other;
  auto empty = jobs::open_sqlite_queue(other.file("empty.db"), test::kFastCommits);
  daemon::Worker drainer(*empty, f.options, f.stop);
  CHECK(drainer.run(/*drain=*/true) == 0);
}

TEST_CASE("a row changed behind the worker's back breaks the fence: logged and dropped, not fatal") {
  if (!have_models()) return;
  Fixture f;
  const int64_t id = f.submit("llama", 50);
  const int64_t next = f.submit("llama", 2);
  daemon::Worker worker(*f.queue, f.options, f.stop);
  worker.set_progress_observer([&](const jobs::Job& job, const GenerationProgress& p) {
    if (p.generated == 2 && job.id == id) {
      jobs::sqlite::Db db(f.db_path);  // someone "fixes" the row by hand mid-run
      db.exec("UPDATE jobs SET state = 'failed', error_kind = 'internal', error = 'by hand' WHERE id = " +
              std::to_string(id));
    }
  });
  CHECK(worker.run_next() == daemon::JobOutcome::lease_lost);
  CHECK(f.job(id).state == JobState::failed);  // the hand edit stands
  CHECK(f.job(id).error == "by hand");
  CHECK_FALSE(f.job(id).result);
  CHECK(worker.run_next() == daemon::JobOutcome::done);
  CHECK(f.job(next).state == JobState::done);
}
