// Copying a queue to another database (what `nightshift migrate-queue` does):
// export_jobs/import_jobs on both backends, and across them (SQLite to
// PostgreSQL and back). Every job keeps its id, state, result, attempt
// history, checkpoint, lease and progress; later submits get higher ids.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "jobs/queue.h"
#include "tests/unit/jobs/backends.h"

using namespace ns::jobs;

namespace {

constexpr int64_t kLeaseMs = 60'000;
const Backoff kNoBackoff{0, 0};

JobSpec spec(const std::string& prompt) { return ns::test::job_spec("tiny", prompt); }

JobResult result(const std::string& text) {
  return {.text = text,
          .finish_reason = "stop",
          .prompt_tokens = 4,
          .completion_tokens = 9,
          .decode_ms = 123.5,
          .bytes_read = 1ULL << 35,
          .avg_batch_size = 3.25};
}

// A queue with a job in every state, and every optional field set somewhere.
void fill_every_state(Queue& q) {
  JobSpec done = spec("done");
  done.idempotency_key = "key-done";
  done.sampling.seed = 0xfedcba9876543210ULL;
  done.sampling.stop = {"\n\n", "END"};
  done.sampling.temperature = 0.7f;
  done.sampling.grammar = "root ::= \"{\" [a-z]* \"}\"\n";
  done.sampling.n = 2;
  done.sampling.logprobs = true;
  done.sampling.top_logprobs = 3;
  done.priority = 9;
  q.submit(done);
  JobSpec chat;
  chat.model = "chat-model";
  chat.messages = R"([{"role":"user","content":"Hi"}])";
  chat.batch = "nightly";
  chat.custom_id = "req-1";
  chat.source_path = "/in/batch.jsonl";
  chat.source_line = 7;
  chat.priority = 8;
  q.submit(chat);
  JobSpec failing = spec("fails");
  failing.priority = 7;
  q.submit(failing);
  JobSpec dying = spec("dies");
  dying.max_attempts = 1;
  dying.priority = 6;
  q.submit(dying);
  JobSpec running = spec("runs");
  running.priority = 5;
  running.sampling.n = 3;
  running.sampling.logprobs = true;
  q.submit(running);
  JobSpec waiting = spec("waits for a retry");
  waiting.priority = 4;
  q.submit(waiting);
  q.submit(spec("cancelled while queued"));
  JobSpec later = spec("queued for later");
  later.not_before_ms = 4'000'000'000'000;
  q.submit(later);

  auto lease = [&] { return ns::test::claim_lease(q, "host-a:1", kLeaseMs); };
  JobResult two = result("the text");
  two.more_choices = {{"choice \"one\"", "length", 4}};
  two.logprobs = "QUJD";  // opaque to the queue
  REQUIRE(q.complete(lease(), two));
  const Lease chat_lease = lease();
  REQUIRE(q.release(chat_lease));  // history: released, then done
  REQUIRE(q.complete(lease(), result("chat answer")));
  REQUIRE(q.fail(lease(), "invalid_input", "bad input"));
  REQUIRE(q.fail_transient(lease(), "io", "gone", kNoBackoff) == JobState::dead);
  const Lease run = lease();
  Checkpoint cp;
  cp.tokens = {5, 6, 7};
  cp.more_tokens = {{8}, {9, 10}};
  cp.logprobs = "records";
  REQUIRE(q.save_checkpoint(run, cp, kLeaseMs));
  JobProgress p;
  p.prompt_tokens = 10;
  p.prefilled = 10;
  p.generated = 3;
  p.tok_s = 1.5;
  REQUIRE(q.heartbeat(run, kLeaseMs, p));
  // Within the default retry_backoff_max_ms: a backoff ending further ahead reads on SQLite as stamped by a
  // clock running ahead, claimable at once (SqliteOptions::max_backoff_ms).
  REQUIRE(q.fail_transient(lease(), "io", "try later", Backoff{300'000, 300'000}) == JobState::queued);
  const std::vector<Job> queued = q.list({.state = JobState::queued, .batch = "", .model = "", .limit = 0});
  for (const Job& j : queued) {
    if (j.spec.prompt == "cancelled while queued") REQUIRE(q.cancel(j.id));
  }
}

std::vector<Queue::JobCopy> everything(Queue& q) {
  std::vector<Queue::JobCopy> all;
  int64_t after = 0;
  while (true) {
    std::vector<Queue::JobCopy> page = q.export_jobs(after, 3);  // small pages: paging is tested too
    if (page.empty()) break;
    after = page.back().job.id;
    for (auto& c : page) all.push_back(std::move(c));
  }
  return all;
}

// Every field the queue can tell, compared (ids only when kept).
void check_same(const std::vector<Queue::JobCopy>& from, const std::vector<Queue::JobCopy>& to, bool same_ids) {
  REQUIRE(from.size() == to.size());
  for (size_t i = 0; i < from.size(); ++i) {
    const Job& a = from[i].job;
    const Job& b = to[i].job;
    CAPTURE(a.id);
    if (same_ids) CHECK(a.id == b.id);
    CHECK(a.spec.model == b.spec.model);
    CHECK(a.spec.prompt == b.spec.prompt);
    CHECK(a.spec.messages == b.spec.messages);
    CHECK(a.spec.sampling.seed == b.spec.sampling.seed);
    CHECK(a.spec.sampling.stop == b.spec.sampling.stop);
    CHECK(a.spec.sampling.temperature == b.spec.sampling.temperature);
    CHECK(a.spec.sampling.grammar == b.spec.sampling.grammar);
    CHECK(a.spec.sampling.n == b.spec.sampling.n);
    CHECK(a.spec.sampling.logprobs == b.spec.sampling.logprobs);
    CHECK(a.spec.sampling.top_logprobs == b.spec.sampling.top_logprobs);
    CHECK(a.spec.priority == b.spec.priority);
    CHECK(a.spec.idempotency_key == b.spec.idempotency_key);
    CHECK(a.spec.max_attempts == b.spec.max_attempts);
    CHECK(a.spec.not_before_ms == b.spec.not_before_ms);
    CHECK(a.spec.batch == b.spec.batch);
    CHECK(a.spec.custom_id == b.spec.custom_id);
    CHECK(a.spec.source_path == b.spec.source_path);
    CHECK(a.spec.source_line == b.spec.source_line);
    CHECK(a.state == b.state);
    CHECK(a.created_ms == b.created_ms);
    CHECK(a.started_ms == b.started_ms);
    CHECK(a.finished_ms == b.finished_ms);
    CHECK(a.worker == b.worker);
    CHECK(a.attempts == b.attempts);
    CHECK(a.attempt == b.attempt);
    CHECK(a.lease_expires_ms == b.lease_expires_ms);
    CHECK(a.cancel_requested == b.cancel_requested);
    CHECK(a.error_kind == b.error_kind);
    CHECK(a.error == b.error);
    CHECK(a.progress.generated == b.progress.generated);
    CHECK(a.progress.tok_s == b.progress.tok_s);
    CHECK(a.progress.updated_ms == b.progress.updated_ms);
    REQUIRE(a.result.has_value() == b.result.has_value());
    if (a.result) {
      CHECK(a.result->text == b.result->text);
      CHECK(a.result->completion_tokens == b.result->completion_tokens);
      CHECK(a.result->decode_ms == b.result->decode_ms);
      CHECK(a.result->bytes_read == b.result->bytes_read);
      CHECK(a.result->avg_batch_size == b.result->avg_batch_size);
      CHECK(a.result->more_choices == b.result->more_choices);
      CHECK(a.result->logprobs == b.result->logprobs);
    }
    REQUIRE(from[i].history.size() == to[i].history.size());
    for (size_t k = 0; k < from[i].history.size(); ++k) {
      const AttemptRecord& x = from[i].history[k];
      const AttemptRecord& y = to[i].history[k];
      CHECK(x.attempt == y.attempt);
      CHECK(x.worker == y.worker);
      CHECK(x.started_ms == y.started_ms);
      CHECK(x.ended_ms == y.ended_ms);
      CHECK(x.resumed_tokens == y.resumed_tokens);
      CHECK(x.outcome == y.outcome);
      CHECK(x.error_kind == y.error_kind);
      CHECK(x.error == y.error);
    }
    REQUIRE(from[i].checkpoint.has_value() == to[i].checkpoint.has_value());
    if (from[i].checkpoint) {
      CHECK(from[i].checkpoint->tokens == to[i].checkpoint->tokens);
      CHECK(from[i].checkpoint->more_tokens == to[i].checkpoint->more_tokens);
      CHECK(from[i].checkpoint->logprobs == to[i].checkpoint->logprobs);
      CHECK(from[i].checkpoint->attempt == to[i].checkpoint->attempt);
      CHECK(from[i].checkpoint->saved_ms == to[i].checkpoint->saved_ms);
    }
  }
}

// Copies `from` into the empty `to` keeping ids, and checks what a daemon
// and people then see there.
void copy_and_check(Queue& from, Queue& to) {
  fill_every_state(from);
  const std::vector<Queue::JobCopy> source = everything(from);
  REQUIRE(source.size() == 8);
  const std::vector<SubmitOutcome> out = to.import_jobs(source, /*keep_ids=*/true, "");
  REQUIRE(out.size() == source.size());
  for (size_t i = 0; i < out.size(); ++i) {
    CHECK(out[i].created);
    CHECK(out[i].id == source[i].job.id);
  }
  check_same(source, everything(to), true);
  const QueueCounts a = from.counts(), b = to.counts();
  CHECK(a.queued == b.queued);
  CHECK(a.running == b.running);
  CHECK(a.done == b.done);
  CHECK(a.failed == b.failed);
  CHECK(a.dead == b.dead);
  CHECK(a.cancelled == b.cancelled);
  CHECK(a.retry_waiting == b.retry_waiting);
  CHECK(b.running == 1);
  CHECK(to.counts("nightly").done == 1);

  // A new job gets an id above every copied one; a known key is not queued twice.
  const int64_t newest = source.back().job.id;
  CHECK(to.submit(spec("new")).id > newest);
  JobSpec again = spec("done, again");
  again.idempotency_key = "key-done";
  CHECK_FALSE(to.submit(again).created);

  // The copied running job is recovered in its new home once its lease is gone, and resumes.
  CHECK(to.recover_worker("host-a:1", kNoBackoff).requeued == 1);
  std::optional<Job> resumed;
  for (const Job& j : to.list({.state = JobState::queued, .batch = "", .model = "", .limit = 0})) {
    if (j.spec.prompt == "runs") resumed = j;
  }
  REQUIRE(resumed);
  CHECK(to.checkpoint(resumed->id)->tokens == std::vector<int32_t>{5, 6, 7});
  CHECK(to.checkpoint(resumed->id)->more_tokens == std::vector<std::vector<int32_t>>{{8}, {9, 10}});
  CHECK(to.checkpoint(resumed->id)->logprobs == "records");
  CHECK(resumed->spec.sampling.n == 3);
  CHECK(resumed->spec.sampling.logprobs);
  CHECK(resumed->spec.sampling.top_logprobs == 0);

  // Into a queue that is no longer empty: ids taken are refused (nothing
  // written), new ids are given instead when asked, known keys are skipped.
  const int64_t before = to.counts().queued + to.counts().done;
  CHECK_THROWS_AS(to.import_jobs(source, true, ""), DatabaseError);
  CHECK(to.counts().queued + to.counts().done == before);
  std::vector<Queue::JobCopy> renamed = source;
  for (auto& c : renamed) {
    if (!c.job.spec.custom_id.empty()) c.job.spec.batch = "nightly-copy";
  }
  const std::vector<SubmitOutcome> appended = to.import_jobs(renamed, /*keep_ids=*/false, "");
  REQUIRE(appended.size() == source.size());
  CHECK_FALSE(appended[0].created);  // key-done is there already
  CHECK(appended[0].id == source[0].job.id);
  for (size_t i = 1; i < appended.size(); ++i) {
    CHECK(appended[i].created);
    CHECK(appended[i].id > newest);
    CHECK(to.attempts(appended[i].id).size() == source[i].history.size());
  }
}

}  // namespace

QUEUE_TEST("a queue copied into an empty one keeps every job, its history and its ids") {
  QUEUE_BACKEND(from);
  QUEUE_BACKEND(to);
  auto a = from.open();
  auto b = to.open();
  copy_and_check(*a, *b);
}

// migrate-queue's bookkeeping: a page and its line in queue_migrations commit
// together, so a copy that stops anywhere (here: a row the target refuses in
// the middle of the second page) keeps the first page and its mark, nothing of
// the second, and continuing after the mark copies every job exactly once,
// jobs without an idempotency key too (issue 19: 273 jobs for 214).
QUEUE_TEST("a copy cut off mid-page keeps whole pages and its mark, and resumes exactly once") {
  QUEUE_BACKEND(from);
  QUEUE_BACKEND(to);
  auto a = from.open();
  auto b = to.open();
  for (int i = 1; i <= 7; ++i) a->submit(spec("keyless " + std::to_string(i)));
  const std::string src = "/srv/old-queue.db";
  CHECK_FALSE(b->migration_mark(src).has_value());

  b->import_jobs(a->export_jobs(0, 3), /*keep_ids=*/false, src);
  std::optional<Queue::MigrationMark> mark = b->migration_mark(src);
  REQUIRE(mark);
  CHECK(mark->last_source_id == 3);
  CHECK(mark->copied == 3);
  CHECK(mark->finished_ms == 0);
  CHECK_FALSE(mark->keep_ids);

  std::vector<Queue::JobCopy> second = a->export_jobs(3, 3);
  second[1].job.spec.prompt.clear();
  second[1].job.spec.messages = "not a conversation";  // refused by the target's CHECK / json cast
  CHECK_THROWS(b->import_jobs(second, false, src));
  CHECK(b->counts().queued == 3);
  CHECK(b->migration_mark(src)->last_source_id == 3);

  // Run again: from the mark on, to the end.
  int64_t after = b->migration_mark(src)->last_source_id;
  while (true) {
    std::vector<Queue::JobCopy> page = a->export_jobs(after, 3);
    if (page.empty()) break;
    after = page.back().job.id;
    b->import_jobs(page, false, src);
  }
  b->finish_migration(src, false);
  CHECK(b->counts().queued == 7);
  mark = b->migration_mark(src);
  CHECK(mark->last_source_id == 7);
  CHECK(mark->copied == 7);
  CHECK(mark->skipped == 0);
  CHECK(mark->finished_ms > 0);
  CHECK(mark->finished_ms >= mark->started_ms);

  // A later run copies only what the source got since; a page reopens the mark.
  a->submit(spec("keyless 8"));
  const std::vector<Queue::JobCopy> newer = a->export_jobs(mark->last_source_id, 3);
  REQUIRE(newer.size() == 1);
  b->import_jobs(newer, false, src);
  CHECK(b->migration_mark(src)->finished_ms == 0);
  CHECK(b->migration_mark(src)->copied == 8);
  CHECK(b->counts().queued == 8);
  // Another source has a mark of its own; finishing a copy that copied nothing records it.
  b->finish_migration("/srv/empty.db", true);
  CHECK(b->migration_mark("/srv/empty.db")->keep_ids);
  CHECK(b->migration_mark("/srv/empty.db")->last_source_id == 0);
}

TEST_CASE("a SQLite queue moves to PostgreSQL, and back, with everything") {
  ns::test::SqliteBackend sqlite;
  ns::test::PgBackend pg;
  if (!pg.available()) {
    MESSAGE("skipped on PostgreSQL: " << pg.skip_reason());
    return;
  }
  SUBCASE("SQLite to PostgreSQL") {
    auto from = sqlite.open();
    auto to = pg.open();
    copy_and_check(*from, *to);
  }
  SUBCASE("PostgreSQL to SQLite") {
    auto from = pg.open();
    auto to = sqlite.open();
    copy_and_check(*from, *to);
  }
}
