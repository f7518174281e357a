// What schema 003 added to the queue contract, on both backends
// (tests/unit/jobs/backends.h): chat jobs, named batches with custom ids and
// provenance, batch claims for the batching engine, progress written with
// heartbeats, the streaming stats of results, and the fleet's workers table.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "jobs/queue.h"
#include "jobs/time_format.h"
#include "tests/unit/jobs/backends.h"

namespace {

using namespace ns::jobs;

constexpr int64_t kLeaseMs = 60'000;

JobSpec completion(const std::string& model, const std::string& prompt, int32_t priority = 0) {
  JobSpec s = ns::test::job_spec(model, prompt);
  s.priority = priority;
  return s;
}

WorkerInfo worker_info(const std::string& id, const std::string& host, int64_t pid) {
  WorkerInfo w;
  w.id = id;
  w.host = host;
  w.pid = pid;
  w.version = "0.1.0";
  return w;
}

std::vector<int64_t> ids_of(const std::vector<Job>& jobs) {
  std::vector<int64_t> ids;
  for (const Job& j : jobs) ids.push_back(j.id);
  return ids;
}

}  // namespace

QUEUE_TEST("chat jobs keep their messages; a job has exactly one input") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  JobSpec chat;
  chat.model = "m";
  chat.messages = R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}])";
  const int64_t id = q->submit(chat).id;
  const auto job = q->get(id);
  REQUIRE(job);
  CHECK(job->spec.is_chat());
  CHECK(job->spec.messages == chat.messages);
  CHECK(job->spec.prompt.empty());

  JobSpec both = chat;
  both.prompt = "and a prompt";
  CHECK_THROWS_WITH_AS(q->submit(both), doctest::Contains("both a prompt and chat messages"), ns::Error);
  JobSpec bad = chat;
  bad.messages = R"([{"role":"user"}])";
  CHECK_THROWS_WITH_AS(q->submit(bad), doctest::Contains("messages[0] has no \"content\""), ns::Error);
  bad.messages = R"({"role":"user","content":"x"})";
  CHECK_THROWS_WITH_AS(q->submit(bad), doctest::Contains("non-empty JSON array"), ns::Error);
  bad.messages = "[not json";
  CHECK_THROWS_WITH_AS(q->submit(bad), doctest::Contains("not JSON"), ns::Error);
  CHECK(q->counts().queued == 1);
}

QUEUE_TEST("batches: custom ids unique within a batch, provenance kept, counts and summaries per batch") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  std::vector<JobSpec> specs;
  for (int i = 1; i <= 3; ++i) {
    JobSpec s = completion("m", "prompt " + std::to_string(i));
    s.batch = "nightly";
    s.custom_id = "req-" + std::to_string(i);
    s.source_path = "/data/in.jsonl";
    s.source_line = i;
    specs.push_back(s);
  }
  q->submit_many(specs);
  q->submit(completion("m", "not in a batch"));
  JobSpec other = completion("m", "other batch");
  other.batch = "adhoc";
  other.custom_id = "req-1";  // the same id in another batch is fine
  q->submit(other);

  JobSpec dup = specs[0];
  dup.prompt = "again";
  CHECK_THROWS_AS(q->submit(dup), DatabaseError);  // req-1 twice in `nightly`
  JobSpec orphan_id = completion("m", "x");
  orphan_id.custom_id = "req-9";
  CHECK_THROWS_WITH_AS(q->submit(orphan_id), doctest::Contains("without a batch"), ns::Error);

  ListFilter f;
  f.batch = "nightly";
  f.limit = 0;
  f.order = ListFilter::Order::oldest_first;
  const std::vector<Job> jobs = q->list(f);
  REQUIRE(jobs.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(jobs[i].spec.custom_id == "req-" + std::to_string(i + 1));
    CHECK(jobs[i].spec.source_line == i + 1);
    CHECK(jobs[i].spec.source_path == "/data/in.jsonl");
    CHECK(jobs[i].spec.batch == "nightly");
  }
  CHECK(jobs[0].id < jobs[2].id);

  // Finish one, fail one: the batch's counts and summary follow.
  auto claimed = q->claim_batch("w", kLeaseMs, 2, "");
  REQUIRE(claimed.size() == 2);
  JobResult r{.text = "out", .finish_reason = "stop"};
  CHECK(q->complete(claimed[0].lease(), r));
  CHECK(q->fail(claimed[1].lease(), "invalid_input", "bad"));
  const QueueCounts c = q->counts("nightly");
  CHECK(c.done == 1);
  CHECK(c.failed == 1);
  CHECK(c.queued == 1);
  CHECK(q->counts("adhoc").queued == 1);
  CHECK(q->counts().queued == 3);

  const std::vector<BatchSummary> batches = q->batches(10);
  REQUIRE(batches.size() == 2);
  const BatchSummary& nightly = batches[0].name == "nightly" ? batches[0] : batches[1];
  CHECK(nightly.counts.done == 1);
  CHECK(nightly.finished_ms == 0);  // one job is still queued

  ListFilter finished;
  finished.order = ListFilter::Order::recently_finished;
  const auto recent = q->list(finished);
  REQUIRE(recent.size() == 2);
  CHECK(recent[0].finished_ms >= recent[1].finished_ms);
}

QUEUE_TEST("claim_batch takes the head of the queue for one model and never jumps a job ahead of it") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t a1 = q->submit(completion("a", "1")).id;
  const int64_t a2 = q->submit(completion("a", "2")).id;
  const int64_t b1 = q->submit(completion("b", "3")).id;
  const int64_t a3 = q->submit(completion("a", "4")).id;
  const int64_t urgent = q->submit(completion("a", "urgent", 5)).id;

  // Priority first, then age; stops at b1 although a3 would fit.
  auto batch = q->claim_batch("w", kLeaseMs, 8, "");
  CHECK(ids_of(batch) == std::vector<int64_t>{urgent, a1, a2});
  for (const Job& j : batch) {
    CHECK(j.state == JobState::running);
    CHECK(j.attempt == 1);
    CHECK(j.worker == "w");
  }
  // The head is now b1: a worker with model a loaded gets nothing.
  CHECK(q->claim_batch("w", kLeaseMs, 8, "a").empty());
  CHECK(ids_of(q->claim_batch("w2", kLeaseMs, 8, "b")) == std::vector<int64_t>{b1});
  // max_jobs bounds it.
  q->submit(completion("a", "5"));
  CHECK(ids_of(q->claim_batch("w", kLeaseMs, 1, "a")) == std::vector<int64_t>{a3});
  CHECK(q->claim_batch("w", kLeaseMs, 0, "a").empty());
  CHECK(q->counts().running == 5);
  // Every claimed job opened its attempt.
  CHECK(q->attempts(a1).size() == 1);
}

QUEUE_TEST("claim_batch with servable models leaves other models' jobs to the daemons that have them") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t x1 = q->submit(completion("x", "1", 9)).id;  // best priority, but this daemon has no x
  const int64_t a1 = q->submit(completion("a", "2")).id;
  const int64_t b1 = q->submit(completion("b", "3")).id;
  const int64_t a2 = q->submit(completion("a", "4")).id;
  const std::vector<std::string> a_and_b{"a", "b"};
  // x1 is invisible to it; the head rule applies to the rest: a1, then b1 stops the batch.
  CHECK(ids_of(q->claim_batch("w", kLeaseMs, 8, "", a_and_b)) == std::vector<int64_t>{a1});
  CHECK(ids_of(q->claim_batch("w", kLeaseMs, 8, "b", a_and_b)) == std::vector<int64_t>{b1});
  CHECK(ids_of(q->claim_batch("w", kLeaseMs, 8, "", {"a"})) == std::vector<int64_t>{a2});
  CHECK(q->claim_batch("w", kLeaseMs, 8, "", {"a", "b"}).empty());
  CHECK(q->get(x1)->state == JobState::queued);
  CHECK(ids_of(q->claim_batch("other", kLeaseMs, 8, "", {"x"})) == std::vector<int64_t>{x1});
}

QUEUE_TEST("next_model names the model claim_batch would take first, and claims nothing") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  CHECK_FALSE(q->next_model({}));
  const int64_t x1 = q->submit(completion("x", "1", 9)).id;
  q->submit(completion("a", "2"));
  CHECK(q->next_model({}) == std::optional<std::string>("x"));
  CHECK(q->next_model({"a", "b"}) == std::optional<std::string>("a"));
  CHECK_FALSE(q->next_model({"b"}));
  CHECK(q->counts().running == 0);  // a look, not a claim
  CHECK(ids_of(q->claim_batch("w", kLeaseMs, 8, "", {})) == std::vector<int64_t>{x1});
  CHECK(q->next_model({"x"}) == std::nullopt);
  CHECK(q->next_model({}) == std::optional<std::string>("a"));
}

QUEUE_TEST("heartbeats carry progress; a fenced-out heartbeat writes none") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t id = q->submit(completion("m", "p")).id;
  const Lease lease = ns::test::claim_lease(*q, "w", kLeaseMs);
  JobProgress p;
  p.prompt_tokens = 100;
  p.prefilled = 100;
  p.generated = 17;
  p.tok_s = 3.5;
  CHECK(q->heartbeat(lease, kLeaseMs, p));
  auto now = q->get(id);
  REQUIRE(now);
  CHECK(now->progress.generated == 17);
  CHECK(now->progress.prompt_tokens == 100);
  CHECK(now->progress.tok_s == doctest::Approx(3.5));
  CHECK(now->progress.updated_ms > 0);
  CHECK(now->progress.eta_s < 0);  // the daemon gave no ETA: unknown (NULL)
  CHECK_FALSE(remaining_eta_s(now->progress, now->progress.updated_ms));
  p.eta_s = 12.5;
  CHECK(q->heartbeat(lease, kLeaseMs, p));
  now = q->get(id);
  CHECK(now->progress.eta_s == doctest::Approx(12.5));
  // Counted down from when it was written, never below 0.
  CHECK(*remaining_eta_s(now->progress, now->progress.updated_ms + 2'500) == doctest::Approx(10.0));
  CHECK(*remaining_eta_s(now->progress, now->progress.updated_ms + 60'000) == 0.0);
  p.eta_s = -1;

  Lease stale = lease;
  stale.attempt += 1;
  p.generated = 99;
  CHECK_FALSE(q->heartbeat(stale, kLeaseMs, p));
  CHECK(q->get(id)->progress.generated == 17);
  CHECK(q->heartbeat(lease, kLeaseMs));  // without progress
  CHECK(q->get(id)->progress.generated == 17);
}

QUEUE_TEST("results keep the streaming and batching stats") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t id = q->submit(completion("m", "p")).id;
  const Lease lease = ns::test::claim_lease(*q, "w", kLeaseMs);
  JobResult r{.text = "t",
              .finish_reason = "length",
              .bytes_read = 1ULL << 33,
              .read_gib_s = 1.75,
              .io_wait_ms = 250,
              .compute_ms = 1250,
              .cache_hit_rate = 0.42,
              .prefetch_accuracy = 0.61,
              .avg_batch_size = 12.5,
              .decode_share_ms = 333.25};
  CHECK(q->complete(lease, r));
  const auto done = q->get(id);
  REQUIRE(done);
  REQUIRE(done->result);
  CHECK(done->result->bytes_read == (1ULL << 33));
  CHECK(done->result->read_gib_s == doctest::Approx(1.75));
  CHECK(done->result->io_wait_ms == doctest::Approx(250));
  CHECK(done->result->compute_ms == doctest::Approx(1250));
  CHECK(done->result->cache_hit_rate == doctest::Approx(0.42));
  CHECK(done->result->prefetch_accuracy == doctest::Approx(0.61));
  CHECK(done->result->avg_batch_size == doctest::Approx(12.5));
  CHECK(done->result->decode_share_ms == doctest::Approx(333.25));
}

QUEUE_TEST("batch_summary: the batch's decode rate over the time it decoded, and each model load once") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  // Four jobs decoded together for one second, 100 tokens each: each saw
  // 100 tok/s, the batch made 400 tok/s. The model load is the first job's.
  for (int i = 0; i < 4; ++i) {
    JobSpec s = completion("m", "p" + std::to_string(i));
    s.batch = "night";
    s.custom_id = "c" + std::to_string(i);
    q->submit(s);
  }
  for (int i = 0; i < 4; ++i) {
    auto job = q->claim("w", kLeaseMs);
    REQUIRE(job);
    JobResult r{.text = "t",
                .finish_reason = "length",
                .completion_tokens = 100,
                .load_ms = i == 0 ? 1500.0 : 0.0,
                .decode_ms = 1000,
                .decode_tok_s = 100,
                .decode_share_ms = 250};
    CHECK(q->complete(job->lease(), r));
  }
  const std::vector<ns::test::Row> rows = db.query("SELECT decode_tok_s, job_decode_tok_s, load_ms FROM batch_summary");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].real(0) == doctest::Approx(400));
  CHECK(rows[0].real(1) == doctest::Approx(100));
  CHECK(rows[0].real(2) == doctest::Approx(1500));
}

// #31: the batch ETA (jobs/batch_eta.h) counts the queued jobs; the view computes the same formula in SQL.
QUEUE_TEST("batch_summary: eta_s is jobs::batch_eta_s of the batch's sums, queued jobs included; load_ms whole ms") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  for (int i = 0; i < 10; ++i) {
    JobSpec s = completion("m", "p" + std::to_string(i));
    s.batch = "night";
    s.sampling.max_tokens = 100;
    q->submit(s);
  }
  JobSpec other = completion("m", "x");  // another batch: not counted
  other.batch = "day";
  q->submit(other);
  for (int tokens : {40, 60}) {
    auto job = q->claim("w", kLeaseMs);
    REQUIRE(job);
    const JobResult r{.text = "t",
                      .finish_reason = "stop",
                      .completion_tokens = tokens,
                      .load_ms = tokens == 40 ? 1234.5678 : 0.0,
                      .decode_ms = 1000};
    CHECK(q->complete(job->lease(), r));
  }
  auto running = q->claim("w", kLeaseMs);
  REQUIRE(running);
  JobProgress progress;
  progress.generated = 20;
  CHECK(q->heartbeat(running->lease(), kLeaseMs, progress));
  // The batch started ten minutes ago.
  db.query("UPDATE jobs SET started_ms = started_ms - 600000 WHERE batch = 'night'");

  const std::vector<BatchSummary> batches = q->batches(0);
  const auto night =
      std::find_if(batches.begin(), batches.end(), [](const BatchSummary& b) { return b.name == "night"; });
  REQUIRE(night != batches.end());
  const BatchProgress& p = night->progress;
  CHECK(p.done == 2);
  CHECK(p.done_tokens == 100);
  CHECK(p.result_tokens == 100);
  CHECK(p.running == 1);
  CHECK(p.running_generated == 20);
  CHECK(p.running_max_tokens == 100);
  CHECK(p.queued == 7);
  CHECK(p.queued_max_tokens == 700);
  CHECK(p.load_ms == doctest::Approx(1234.5678));
  const int64_t now = ns::jobs::now_epoch_ms();
  const std::optional<double> eta = batch_eta_s(p, now);
  REQUIRE(eta);
  // Left: 7 queued x 50 + 50 - 20; 120 tokens over 600 s less the load.
  CHECK(*eta == doctest::Approx((7 * 50 + 30) / (120 / (600 - 1.2345678))).epsilon(0.01));
  const std::vector<ns::test::Row> rows = db.query("SELECT eta_s, load_ms FROM batch_summary WHERE batch = 'night'");
  REQUIRE(rows.size() == 1);
  CHECK(std::abs(rows[0].real(0) - *eta) <= 1.0);  // whole seconds
  CHECK(rows[0].text(1) == "1235");                // was 1234.5678
  // Nothing left to run: no ETA.
  CHECK(db.query("SELECT eta_s FROM batch_summary WHERE batch = 'day'").at(0).is_null(0));
}

QUEUE_TEST("workers register, beat, stop; status reads them back") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  q->register_worker(worker_info("host-a:1", "host-a", 1234));
  const WorkerInfo b = worker_info("host-b:7", "host-b", 1234);
  q->register_worker(b);
  const std::vector<int64_t> running{4, 9};
  q->worker_heartbeat("host-a:1", "kimi", running);
  q->worker_stopped("host-b:7");

  const auto fleet = q->workers();
  REQUIRE(fleet.size() == 2);
  CHECK(fleet[0].id == "host-a:1");  // running ones first
  CHECK(fleet[0].model == "kimi");
  CHECK(fleet[0].jobs == running);
  CHECK(fleet[0].pid == 1234);
  CHECK(fleet[0].stopped_ms == 0);
  CHECK(fleet[0].heartbeat_ms >= fleet[0].started_ms);
  CHECK(fleet[1].id == "host-b:7");
  CHECK(fleet[1].stopped_ms > 0);
  CHECK(fleet[1].jobs.empty());
  // A restart under the same id clears stopped.
  q->register_worker(b);
  for (const WorkerInfo& x : q->workers()) CHECK(x.stopped_ms == 0);
}

QUEUE_TEST("the summary views read the new columns") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  JobSpec s = completion("m", "p");
  s.batch = "b1";
  s.custom_id = "c1";
  s.source_path = "in.jsonl";
  s.source_line = 3;
  q->submit(s);
  auto job = q->claim("w", kLeaseMs);
  REQUIRE(job);
  JobProgress p;
  p.generated = 5;
  p.tok_s = 2.25;
  CHECK(q->heartbeat(job->lease(), kLeaseMs, p));

  const std::vector<ns::test::Row> jobs =
      db.query("SELECT state, batch, custom_id, tokens, tok_s, source FROM job_summary");
  REQUIRE(jobs.size() == 1);
  const ns::test::Row& js = jobs[0];
  CHECK(js.text(0) == "running");
  CHECK(js.text(1) == "b1");
  CHECK(js.text(2) == "c1");
  CHECK(js.int64(3) == 5);
  CHECK(js.real(4) == doctest::Approx(2.25));
  CHECK(js.text(5) == "in.jsonl:3");
  const std::vector<ns::test::Row> batches = db.query("SELECT batch, jobs, running, finished FROM batch_summary");
  REQUIRE(batches.size() == 1);
  const ns::test::Row& bs = batches[0];
  CHECK(bs.text(0) == "b1");
  CHECK(bs.int64(1) == 1);
  CHECK(bs.int64(2) == 1);
  CHECK(bs.is_null(3));
}

QUEUE_TEST("a worker's configuration problem is kept with its heartbeat and cleared by the next one") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  q->register_worker(worker_info("host-a:1", "host-a", 1));
  CHECK(q->workers().at(0).problem.empty());
  q->worker_heartbeat("host-a:1", "", {}, "model tinny: not in the config (2 job(s) left queued)");
  CHECK(q->workers().at(0).problem == "model tinny: not in the config (2 job(s) left queued)");
  q->worker_heartbeat("host-a:1", "tiny", {});
  CHECK(q->workers().at(0).problem.empty());
}

QUEUE_TEST("a released job's reason goes to its attempt; the attempt is given back") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t id = q->submit(completion("tinny", "x")).id;
  const Job j = q->claim_batch("w", kLeaseMs, 1, "").at(0);
  REQUIRE(q->release(j.lease(), "model 'tinny' is not in the daemon's config"));
  const Job after = *q->get(id);
  CHECK(after.state == JobState::queued);
  CHECK(after.attempts == 0);
  const auto history = q->attempts(id);
  REQUIRE(history.size() == 1);
  CHECK(history[0].outcome == "released");
  CHECK(history[0].error_kind == "daemon_config");
  CHECK(history[0].error == "model 'tinny' is not in the daemon's config");
}

QUEUE_TEST("a batch held for two causes says each model's reason and count") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  JobSpec s = completion("chta", "x");
  s.batch = "nightly";
  for (const char* id : {"t1", "t2"}) {
    s.custom_id = id;
    q->submit(s);
  }
  s.model = "docs";
  s.custom_id = "d1";
  q->submit(s);
  for (const Job& j : q->claim_batch("w", kLeaseMs, 2, "chta"))
    REQUIRE(q->release(j.lease(), "model 'chta' is unknown"));
  const std::vector<Job> docs = q->claim_batch("w", kLeaseMs, 1, "docs", {"docs"});  // past the held chta jobs
  REQUIRE(docs.size() == 1);
  REQUIRE(q->release(docs[0].lease(), "docs.gguf is missing"));
  const QueueCounts c = q->counts("nightly");
  CHECK(c.held == 3);
  CHECK(c.held_reason == "model chta, 2 jobs: model 'chta' is unknown; model docs, 1 job: docs.gguf is missing");
  CHECK(q->counts().held_reason == c.held_reason);
}

QUEUE_TEST("a job released for its daemon's configuration is held: on the job, in the counts and in the views") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const std::string why = "model 'tinny' is not in the daemon's config (known models: tiny)";
  JobSpec s = completion("tinny", "x");
  s.batch = "nightly";
  s.custom_id = "c1";
  const int64_t id = q->submit(s).id;
  s.custom_id = "c2";
  const int64_t other = q->submit(s).id;
  CHECK_FALSE(is_held(*q->get(id)));
  for (const Job& j : q->claim_batch("w", kLeaseMs, 2, "")) REQUIRE(q->release(j.lease(), why));
  const Job held = *q->get(id);
  CHECK(is_held(held));
  CHECK(held.error_kind == "daemon_config");
  CHECK(held.error == why);
  const QueueCounts c = q->counts("nightly");
  CHECK(c.queued == 2);
  CHECK(c.held == 2);
  CHECK(c.held_reason == why);
  CHECK(q->counts().held == 2);
  CHECK(q->counts("other").held == 0);
  REQUIRE(q->batches(10).size() == 1);
  CHECK(q->batches(10)[0].counts.held == 2);
  CHECK(q->batches(10)[0].counts.held_reason == why);
  const std::vector<ns::test::Row> jobs = db.query("SELECT held FROM job_summary ORDER BY id");
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0].text(0) == why);
  const std::vector<ns::test::Row> batches = db.query("SELECT queued, held, held_reason FROM batch_summary");
  REQUIRE(batches.size() == 1);
  CHECK(batches[0].int64(0) == 2);
  CHECK(batches[0].int64(1) == 2);
  CHECK(batches[0].text(2) == why);
  // Claimed by a daemon that serves it, then released on shutdown: no longer held.
  const Job again = q->claim_batch("w2", kLeaseMs, 1, "").at(0);
  CHECK_FALSE(is_held(*q->get(again.id)));  // running
  REQUIRE(q->release(again.lease()));
  CHECK_FALSE(is_held(*q->get(again.id)));
  CHECK(q->get(again.id)->error.empty());
  // Re-pointed with retry --model: no longer held.
  const int64_t still = again.id == id ? other : id;
  CHECK(is_held(*q->get(still)));
  CHECK(q->retry(still, "tiny") == RetryOutcome::requeued);
  CHECK_FALSE(is_held(*q->get(still)));
  CHECK(q->counts("nightly").held == 0);
  CHECK(q->counts("nightly").held_reason.empty());
  CHECK(db.query("SELECT held FROM batch_summary").at(0).int64(0) == 0);
}

QUEUE_TEST("retry with a model runs the job on that model from now on; without one the model stays") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t a = q->submit(completion("tinny", "a")).id;
  const int64_t b = q->submit(completion("tinny", "b")).id;
  for (int i = 0; i < 2; ++i) {
    const Job j = q->claim_batch("w", kLeaseMs, 1, "").at(0);
    REQUIRE(q->fail(j.lease(), "invalid_input", "wrong model"));
  }
  CHECK(q->retry(a, "tiny") == RetryOutcome::requeued);
  CHECK(q->retry(b) == RetryOutcome::requeued);
  CHECK(q->get(a)->spec.model == "tiny");
  CHECK(q->get(a)->state == JobState::queued);
  CHECK(q->get(b)->spec.model == "tinny");
  CHECK(q->retry(b) == RetryOutcome::not_retryable);  // queued, no model: nothing to change
  // A queued job (held by daemons that cannot serve its model) is moved to another model.
  CHECK(q->retry(a, "other") == RetryOutcome::requeued);
  CHECK(q->get(a)->spec.model == "other");
  CHECK(q->get(a)->state == JobState::queued);
  // A running one is not.
  const Job running = q->claim_batch("w", kLeaseMs, 1, "").at(0);
  CHECK(q->retry(running.id, "third") == RetryOutcome::not_retryable);
  CHECK(q->get(running.id)->spec.model != "third");
}

QUEUE_TEST("prune deletes finished jobs of the given states older than the age, with their rows; never queued ones") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t done = q->submit(completion("m", "done")).id;
  const int64_t failed = q->submit(completion("m", "failed")).id;
  const int64_t queued = q->submit(completion("m", "queued", -1)).id;
  Job j = q->claim_batch("w", kLeaseMs, 1, "").at(0);
  REQUIRE(j.id == done);
  JobResult r{.text = "ok", .finish_reason = "stop"};
  REQUIRE(q->complete(j.lease(), r));
  j = q->claim_batch("w", kLeaseMs, 1, "").at(0);
  REQUIRE(q->fail(j.lease(), "invalid_input", "bad"));

  const std::vector<JobState> every = {JobState::queued, JobState::running,   JobState::done,
                                       JobState::failed, JobState::cancelled, JobState::dead};
  CHECK(q->prune(3'600'000, every) == 0);  // finished just now: younger than an hour
  // A negative age puts the cut-off in the future: everything finished counts as old.
  CHECK(q->prune(-60'000, every, /*dry_run=*/true) == 2);  // counted, not deleted
  CHECK(q->get(done).has_value());
  CHECK(q->prune(-60'000, {JobState::done}) == 1);
  CHECK_FALSE(q->get(done).has_value());
  CHECK(q->attempts(done).empty());
  CHECK(q->get(failed).has_value());
  CHECK(q->prune(-60'000, every) == 1);  // the failed one; never the queued one
  CHECK_FALSE(q->get(failed).has_value());
  CHECK(q->get(queued)->state == JobState::queued);
  CHECK(q->counts().queued == 1);
}

QUEUE_TEST("model_totals and token_history add up the results per model and per finish time") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  // Model a: two done jobs (100 and 300 tokens) and one queued; model b: one failed, no result.
  int n = 0;
  for (const char* m : {"a", "a", "a", "b"}) q->submit(completion(m, "prompt " + std::to_string(n++)));
  const double hit[] = {0.5, 0.9}, batch[] = {2, 4};
  const int32_t tokens[] = {100, 300};
  for (int i = 0; i < 2; ++i) {
    auto job = q->claim("w", kLeaseMs);
    REQUIRE(job);
    REQUIRE(job->spec.model == "a");
    JobResult r{.text = "t",
                .finish_reason = "length",
                .prompt_tokens = 10,
                .completion_tokens = tokens[i],
                .queue_wait_ms = 1000.0 * (i + 1),
                .bytes_read = 1ULL << 32,
                .io_wait_ms = 100,
                .compute_ms = 300,
                .cache_hit_rate = hit[i],
                .avg_batch_size = batch[i],
                .decode_share_ms = 500};
    CHECK(q->complete(job->lease(), r));
  }
  auto third = q->claim("w", kLeaseMs);  // the third "a" job: left running
  REQUIRE(third);
  auto b = q->claim("w", kLeaseMs);
  REQUIRE(b);
  REQUIRE(b->spec.model == "b");
  CHECK(q->fail(b->lease(), "invalid_input", "bad"));

  const std::vector<ModelTotals> totals = q->model_totals();
  REQUIRE(totals.size() == 2);
  const ModelTotals& a = totals[0];
  CHECK(a.model == "a");
  CHECK(a.jobs.done == 2);
  CHECK(a.jobs.running == 1);
  CHECK(a.results == 2);
  CHECK(a.prompt_tokens == 20);
  CHECK(a.completion_tokens == 400);
  CHECK(a.bytes_read == (2ULL << 32));
  CHECK(a.queue_wait_ms == doctest::Approx(3000));
  CHECK(a.decode_share_ms == doctest::Approx(1000));
  CHECK(a.io_wait_ms == doctest::Approx(200));
  CHECK(a.compute_ms == doctest::Approx(600));
  CHECK(a.cache_hit_rate_x_tokens == doctest::Approx(0.5 * 100 + 0.9 * 300));
  CHECK(a.batch_size_x_tokens == doctest::Approx(2 * 100 + 4 * 300));
  CHECK(totals[1].model == "b");
  CHECK(totals[1].jobs.failed == 1);
  CHECK(totals[1].results == 0);
  CHECK(totals[1].completion_tokens == 0);

  // One bucket over all time; none since an hour from now; buckets aligned to their width.
  const std::vector<TokenBucket> all = q->token_history(0, int64_t{1} << 50);
  REQUIRE(all.size() == 1);
  CHECK(all[0].start_ms == 0);
  CHECK(all[0].jobs == 2);
  CHECK(all[0].completion_tokens == 400);
  CHECK(all[0].decode_share_ms == doctest::Approx(1000));
  const Job done = q->list({.state = JobState::done, .limit = 1}).at(0);
  CHECK(q->token_history(done.finished_ms + 3'600'000, 60'000).empty());
  for (const TokenBucket& t : q->token_history(0, 1000)) CHECK(t.start_ms % 1000 == 0);
  CHECK_THROWS_AS(q->token_history(0, 0), ns::Error);
}
