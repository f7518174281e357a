// The worker decoding several jobs together (continuous batching) on a real
// queue file and real models: each job's text equals what it gets alone,
// queue order decides who joins, a job that fails or is cancelled leaves the
// others running, stop releases every job of the batch with its checkpoint,
// and chat jobs for a model without a template fail alone.
#include <doctest/doctest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "daemon/lib/worker.h"
#include "jobs/queue.h"
#include "jobs/sqlite_queue.h"
#include "tests/unit/daemon/generated_models.h"
#include "tests/unit/jobs/fast_queue.h"
#include "tests/unit/jobs/temp_dir.h"

using namespace ns;
using jobs::JobState;

namespace {

const std::string kMixtral = std::string(NS_SHARED_DIR) + "/models/tiny-mixtral-bpe-q4_0.gguf";

bool have_mixtral() {
  if (std::filesystem::exists(kMixtral)) return true;
  MESSAGE("skipping: shared models not found under " << NS_SHARED_DIR);
  return false;
}

struct Fixture {
  test::TempDir dir;
  std::string db_path;
  std::unique_ptr<jobs::Queue> queue;
  std::atomic<bool> stop{false};
  daemon::WorkerOptions options;

  Fixture(const std::string& model_path, int max_batch, const std::string& db_name = "q.db")
      : db_path(dir.file(db_name)), queue(jobs::open_sqlite_queue(db_path, test::kFastCommits)) {
    spdlog::set_level(spdlog::level::err);
    options.worker_id = "batch-worker";
    options.models = {{"m", model_path}, {"other", model_path}};
    options.engine.threads = 2;
    options.engine.context = 256;
    options.engine.max_sequences = max_batch;
    options.poll_interval_ms = 10;
    options.cancel_poll_ms = 1;  // let queued jobs join at the next step
    options.retry_backoff = {0, 0};
  }

  int64_t submit(const std::string& prompt, int max_tokens, float temperature = 0, uint64_t seed = 1,
                 const std::string& model = "m", int priority = 0) {
    jobs::JobSpec s = test::generation_spec(model, prompt, max_tokens);
    s.priority = priority;
    s.sampling.temperature = temperature;
    s.sampling.seed = seed;
    return queue->submit(s).id;
  }
  jobs::Job job(int64_t id) { return *queue->get(id); }
};

struct Request {
  std::string prompt;
  int max_tokens;
  float temperature;
  uint64_t seed;
};

const std::vector<Request> kRequests = {
    {"Once upon a time", 12, 0, 1},
    {"The quick brown fox", 5, 0, 1},
    {"In a hole in the ground there lived", 20, 0.8f, 42},
    {"It was a bright cold day in April", 9, 1.0f, 7},
    {"Call me", 16, 0, 1},
};

// Runs kRequests through a worker with batches of `max_batch`; texts by request index.
std::vector<std::string> run_all(const std::string& model, int max_batch, double* avg_batch = nullptr) {
  Fixture f(model, max_batch);
  std::vector<int64_t> ids;
  for (const Request& r : kRequests) ids.push_back(f.submit(r.prompt, r.max_tokens, r.temperature, r.seed));
  daemon::Worker worker(*f.queue, f.options, f.stop);
  CHECK(worker.run(/*drain=*/true) == static_cast<int>(kRequests.size()));
  std::vector<std::string> texts;
  double batch_sum = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const jobs::Job j = f.job(ids[i]);
    CHECK(j.state == JobState::done);
    REQUIRE(j.result);
    CHECK(j.result->completion_tokens == kRequests[i].max_tokens);
    CHECK(j.result->avg_batch_size >= 1.0);
    batch_sum += j.result->avg_batch_size;
    texts.push_back(j.result->text);
  }
  if (avg_batch != nullptr) *avg_batch = batch_sum / static_cast<double>(ids.size());
  return texts;
}

}  // namespace

TEST_CASE("jobs decoded together get exactly the text each gets alone (greedy and seeded)") {
  if (!have_mixtral()) return;
  double sequential_batch = 0, batched = 0;
  const std::vector<std::string> alone = run_all(kMixtral, 1, &sequential_batch);
  const std::vector<std::string> together = run_all(kMixtral, 3, &batched);
  CHECK(sequential_batch == doctest::Approx(1.0));
  CHECK(batched > 1.5);  // they really shared steps
  MESSAGE("mean batch size with max_batch 3: " << batched);
  REQUIRE(alone.size() == together.size());
  for (size_t i = 0; i < alone.size(); ++i) {
    CAPTURE(i);
    CHECK(together[i] == alone[i]);
  }
}

TEST_CASE("queue order decides who joins: a batch never jumps a job that wants another model") {
  auto model = test::small_model();
  if (!model) return;
  Fixture f(*model, 4);
  const int64_t a1 = f.submit("one", 30);
  const int64_t a2 = f.submit("two", 10);
  const int64_t b1 = f.submit("three", 10, 0, 1, "other");
  const int64_t a3 = f.submit("four", 10);
  const int64_t urgent = f.submit("five", 10, 0, 1, "m", /*priority=*/9);
  daemon::Worker worker(*f.queue, f.options, f.stop);
  CHECK(worker.run(/*drain=*/true) == 5);
  for (int64_t id : {a1, a2, b1, a3, urgent}) CHECK(f.job(id).state == JobState::done);
  // urgent, a1 and a2 ran together; b1 only after all of them; a3 after b1.
  const int64_t first_batch_end = std::max({f.job(urgent).finished_ms, f.job(a1).finished_ms, f.job(a2).finished_ms});
  CHECK(f.job(b1).started_ms >= first_batch_end);
  CHECK(f.job(a3).started_ms >= f.job(b1).finished_ms);
  CHECK(f.job(a1).started_ms <= f.job(a2).finished_ms);
  CHECK(f.job(a1).result->avg_batch_size > 1.0);
  CHECK(f.job(b1).result->avg_batch_size == doctest::Approx(1.0));
  // Each model load is charged once, to the first job that joined after it
  // (the head of the queue), not to every job that waited for it.
  CHECK(f.job(urgent).result->load_ms > 0);
  CHECK(f.job(a1).result->load_ms == 0);
  CHECK(f.job(a2).result->load_ms == 0);
  CHECK(f.job(b1).result->load_ms > 0);  // "other" is loaded for it
  CHECK(f.job(a3).result->load_ms > 0);  // and "m" again after it
}

TEST_CASE("a running job's tok/s and ETA come from its batch's step rate") {
  auto model = test::small_model();
  if (!model) return;
  Fixture f(*model, 4);
  const int64_t a = f.submit("one", 120), b = f.submit("two", 120);
  daemon::RunStatus status;
  daemon::Worker worker(*f.queue, f.options, f.stop, &status);
  std::vector<daemon::RunStatus::JobView> seen;
  worker.set_progress_observer([&](const jobs::Job& job, const GenerationProgress& p) {
    if (job.id == a && p.generated == 60) seen = status.snapshot().jobs;
  });
  CHECK(worker.run(/*drain=*/true) == 2);
  REQUIRE(seen.size() == 2);
  for (const auto& j : seen) {
    CAPTURE(j.lease.job_id);
    CHECK(j.tok_s > 0);
    CHECK(j.eta_s > 0);
  }
  // Both decode one token per step: the same rate, whatever each has done.
  CHECK(seen[0].tok_s == doctest::Approx(seen[1].tok_s).epsilon(0.3));
  const auto& other = seen[0].lease.job_id == b ? seen[0] : seen[1];
  CHECK(other.lease.job_id == b);
}

TEST_CASE("a job joins a running batch at the next step and leaves when it ends") {
  auto model = test::small_model();
  if (!model) return;
  Fixture f(*model, 4);
  const int64_t long_job = f.submit("long", 200);
  int64_t late = 0;
  daemon::Worker worker(*f.queue, f.options, f.stop);
  worker.set_progress_observer([&](const jobs::Job& job, const GenerationProgress& p) {
    if (job.id == long_job && p.generated == 20 && late == 0) late = f.submit("late", 10);
  });
  CHECK(worker.run_next() == daemon::JobOutcome::done);  // the late one ends first
  REQUIRE(late != 0);
  CHECK(f.job(late).state == JobState::done);
  CHECK(f.job(long_job).state == JobState::running);
  CHECK(worker.active() == 1);
  CHECK(worker.run_next() == daemon::JobOutcome::done);
  CHECK(f.job(long_job).state == JobState::done);
  CHECK(f.job(late).started_ms < f.job(long_job).finished_ms);
}

TEST_CASE("in a batch, a bad job fails alone and a cancelled job ends alone") {
  auto model = test::small_model();
  if (!model) return;
  Fixture f(*model, 4);
  const int64_t good = f.submit("good", 40);
  const int64_t cancelled = f.submit("to be cancelled", 400);
  jobs::JobSpec chat;
  chat.model = "m";
  chat.messages = R"([{"role":"user","content":"hello"}])";
  const int64_t chat_id = f.queue->submit(chat).id;
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += "word" + std::to_string(i) + " ";
  const int64_t too_long = f.submit(long_prompt, 5);  // more tokens than the context
  daemon::Worker worker(*f.queue, f.options, f.stop);
  worker.set_progress_observer([&](const jobs::Job& job, const GenerationProgress& p) {
    if (job.id == cancelled && p.generated == 5) f.queue->cancel(cancelled);
  });
  CHECK(worker.run(/*drain=*/true) == 4);
  CHECK(f.job(good).state == JobState::done);
  CHECK(f.job(good).result->completion_tokens == 40);
  CHECK(f.job(cancelled).state == JobState::cancelled);
  CHECK(f.job(chat_id).state == JobState::failed);
  CHECK(f.job(chat_id).error.find("has no chat template") != std::string::npos);
  CHECK(f.job(too_long).state == JobState::failed);
  CHECK(f.job(too_long).error_kind == "invalid_input");
}

TEST_CASE("stop releases every job of the batch with its checkpoint; resumed, they end as if never stopped") {
  auto model = test::small_model();
  if (!model) return;
  std::map<int64_t, std::string> uninterrupted;
  {
    Fixture f(*model, 3, "reference.db");
    for (int i = 0; i < 3; ++i) f.submit("story " + std::to_string(i), 60, 0.7f, 100 + i);
    daemon::Worker worker(*f.queue, f.options, f.stop);
    CHECK(worker.run(/*drain=*/true) == 3);
    for (const jobs::Job& j : f.queue->list({})) uninterrupted[j.id] = j.result->text;
  }
  Fixture f(*model, 3);
  for (int i = 0; i < 3; ++i) f.submit("story " + std::to_string(i), 60, 0.7f, 100 + i);
  f.options.checkpoint_tokens = 8;
  daemon::Worker worker(*f.queue, f.options, f.stop);
  worker.set_progress_observer([&](const jobs::Job&, const GenerationProgress& p) {
    if (p.generated >= 25) f.stop = true;
  });
  worker.run(/*drain=*/false);
  CHECK(worker.active() == 0);
  CHECK(f.queue->counts().queued == 3);
  for (const jobs::Job& j : f.queue->list({})) {
    const auto cp = f.queue->checkpoint(j.id);
    REQUIRE(cp);
    CHECK(cp->tokens.size() >= 20);
    CHECK(j.attempts == 0);  // a graceful release gives the attempt back
  }
  f.stop = false;
  daemon::Worker again(*f.queue, f.options, f.stop);
  CHECK(again.run(/*drain=*/true) == 3);
  for (const jobs::Job& j : f.queue->list({})) {
    CHECK(j.state == JobState::done);
    CHECK(j.result->text == uninterrupted[j.id]);
  }
}

TEST_CASE("a chat job is rendered with the model's chat template and runs beside completion jobs") {
  if (!test::have_generator()) return;
  // A ChatML template in the GGUF, as Qwen instruct models carry it.
  const std::string model = test::make_model(
      "daemon-chatml-q8",
      "--arch llama --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 128 --type Q8_0 --seed 3 "
      "--chat-template '{% for message in messages %}{{\"<|im_start|>\" + message[\"role\"] + \"\\n\" + "
      "message[\"content\"] + \"<|im_end|>\\n\"}}{% endfor %}{% if add_generation_prompt %}"
      "{{\"<|im_start|>assistant\\n\"}}{% endif %}'");
  Fixture f(model, 4);
  jobs::JobSpec chat;
  chat.model = "m";
  chat.messages = R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Name a colour."}])";
  chat.sampling.max_tokens = 12;
  chat.sampling.temperature = 0;
  chat.sampling.ignore_eos = true;
  const int64_t chat_id = f.queue->submit(chat).id;
  // The same conversation as a plain prompt, rendered by hand in ChatML.
  const int64_t plain_id = f.submit(
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n",
      12);
  daemon::Worker worker(*f.queue, f.options, f.stop);
  CHECK(worker.run(/*drain=*/true) == 2);
  const jobs::Job c = f.job(chat_id), p = f.job(plain_id);
  REQUIRE(c.state == JobState::done);
  REQUIRE(p.state == JobState::done);
  CHECK(c.result->text == p.result->text);
  CHECK(c.result->prompt_tokens == p.result->prompt_tokens);
}

TEST_CASE("claim_models: configured leaves jobs for models this daemon lacks in the queue") {
  auto model = test::small_model();
  if (!model) return;
  Fixture f(*model, 4);
  const int64_t foreign = f.submit("for another machine", 5, 0, 1, "elsewhere", /*priority=*/9);
  const int64_t mine = f.submit("mine", 5);
  f.options.claim_configured_only = true;
  daemon::Worker worker(*f.queue, f.options, f.stop);
  CHECK(worker.run(/*drain=*/true) == 1);
  CHECK(f.job(mine).state == JobState::done);
  CHECK(f.job(foreign).state == JobState::queued);  // not failed: another daemon has the model
  f.options.claim_configured_only = false;          // the default: claim it, give it back, say why
  daemon::RunStatus status;
  daemon::Worker any(*f.queue, f.options, f.stop, &status);
  CHECK(any.run(/*drain=*/true) == 0);
  CHECK(f.job(foreign).state == JobState::queued);  // the daemon's config is at fault, not the job
  CHECK(f.job(foreign).attempts == 0);
  const auto history = f.queue->attempts(foreign);
  REQUIRE(history.size() == 1);
  CHECK(history[0].outcome == "released");
  CHECK(history[0].error_kind == "daemon_config");
  CHECK(history[0].error.find("not in the daemon's config") != std::string::npos);
  CHECK(status.snapshot().problem.find("model elsewhere: model 'elsewhere' is not in the daemon's config") == 0);
}

TEST_CASE("a job of n choices waits for n free slots, then runs its choices together; n above max_batch fails") {
  auto model = test::small_model();
  if (!model) return;
  Fixture f(*model, 3);
  const int64_t first = f.submit("A long one goes first", 40);
  jobs::JobSpec s;
  s.model = "m";
  s.prompt = "Three ways to say it";
  s.sampling.max_tokens = 5;
  s.sampling.temperature = 0.9f;
  s.sampling.seed = 7;
  s.sampling.ignore_eos = true;
  s.sampling.n = 3;
  const int64_t three = f.queue->submit(s).id;
  const int64_t after = f.submit("And one behind it", 4);
  s.sampling.n = 4;
  const int64_t too_many = f.queue->submit(s).id;
  daemon::Worker worker(*f.queue, f.options, f.stop);
  worker.run(/*drain=*/true);
  for (int64_t id : {first, three, after}) CHECK(f.job(id).state == JobState::done);
  const jobs::Job j = f.job(three);
  REQUIRE(j.result);
  CHECK(j.result->more_choices.size() == 2);
  CHECK(j.result->completion_tokens == 15);
  // It went back to the queue once (2 of 3 slots free), not at every step of the long job.
  int released = 0;
  for (const jobs::AttemptRecord& a : f.queue->attempts(three)) released += a.outcome == "released";
  CHECK(released <= 1);
  CHECK(f.job(three).started_ms >= f.job(first).finished_ms);
  CHECK(f.job(too_many).state == JobState::failed);
  CHECK(f.job(too_many).error.find("lower n or raise max_batch") != std::string::npos);
}
