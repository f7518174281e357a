// Leases on both backends (tests/unit/jobs/backends.h): the fence on every
// worker write, heartbeats, recovery of expired leases (backoff,
// max_attempts, `dead`), transient failures, `retry`, checkpoints, and two
// workers that never run one job.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "jobs/queue.h"
#include "jobs/time_format.h"
#include "tests/unit/jobs/backends.h"

namespace {

using namespace ns::jobs;
using namespace std::chrono_literals;

constexpr int64_t kLongLease = 60'000;
const Backoff kNoBackoff{0, 0};

JobSpec spec(const std::string& prompt, int32_t max_attempts = 3) {
  JobSpec s = ns::test::job_spec("tiny", prompt);
  s.max_attempts = max_attempts;
  return s;
}

JobResult result(const std::string& text) { return {.text = text, .finish_reason = "stop", .completion_tokens = 3}; }

using ns::test::claim_lease;

// Claims with a lease that lapses at once, then waits until it has.
Lease claim_and_let_expire(Queue& q, const std::string& worker) {
  const Lease l = claim_lease(q, worker, 1);
  std::this_thread::sleep_for(5ms);
  return l;
}

}  // namespace

QUEUE_TEST("claim opens a lease and an attempt; a heartbeat extends the lease") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t id = q->submit(spec("p")).id;
  const int64_t before = now_epoch_ms();
  std::optional<Job> j = q->claim("w1", 10'000);
  REQUIRE(j);
  CHECK(j->id == id);
  CHECK(j->state == JobState::running);
  CHECK(j->attempt == 1);
  CHECK(j->attempts == 1);
  CHECK(j->lease_expires_ms >= before + 10'000);
  CHECK(j->lease_expires_ms <= now_epoch_ms() + 10'000);

  std::vector<AttemptRecord> history = q->attempts(id);
  REQUIRE(history.size() == 1);
  CHECK(history[0].attempt == 1);
  CHECK(history[0].worker == "w1");
  CHECK(history[0].started_ms == j->started_ms);
  CHECK(history[0].ended_ms == 0);
  CHECK(history[0].outcome.empty());  // still running

  CHECK(q->heartbeat(j->lease(), 50'000));
  CHECK(q->get(id)->lease_expires_ms >= before + 50'000);
}

QUEUE_TEST("writes by anyone but the lease holder of that attempt change nothing") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t id = q->submit(spec("p")).id;
  const Lease mine = claim_lease(*q, "w1");
  const Job before = *q->get(id);
  const std::vector<int32_t> tokens = {5, 6, 7};

  for (const Lease& wrong : {Lease{id, "w2", mine.attempt}, Lease{id, "w1", mine.attempt + 1},
                             Lease{id, "w1", mine.attempt - 1}, Lease{id + 1, "w1", mine.attempt}}) {
    CAPTURE(wrong.worker);
    CAPTURE(wrong.attempt);
    CHECK_FALSE(q->heartbeat(wrong, 1));
    CHECK_FALSE(q->save_checkpoint(wrong, tokens, 1));
    CHECK_FALSE(q->complete(wrong, result("forged")));
    CHECK_FALSE(q->fail(wrong, "internal", "forged"));
    CHECK_FALSE(q->fail_transient(wrong, "io", "forged", kNoBackoff));
    CHECK_FALSE(q->finish_cancelled(wrong, result("forged")));
    CHECK_FALSE(q->release(wrong));
  }
  const Job after = *q->get(id);
  CHECK(after.state == JobState::running);
  CHECK(after.lease_expires_ms == before.lease_expires_ms);
  CHECK(after.attempts == 1);
  CHECK_FALSE(after.result);
  CHECK_FALSE(q->checkpoint(id));
  CHECK(q->attempts(id)[0].outcome.empty());

  CHECK(q->complete(mine, result("real")));  // the holder still can
  CHECK(q->get(id)->result->text == "real");
}

QUEUE_TEST("an expired lease goes back to the queue with its checkpoint; the old holder is fenced out") {
  QUEUE_BACKEND(db);
  auto daemon_a = db.open();
  auto daemon_b = db.open();
  const int64_t id = daemon_a->submit(spec("p")).id;

  const Lease a = claim_lease(*daemon_a, "daemon-a", 1);
  const std::vector<int32_t> tokens = {11, 12, 13, 14};
  CHECK(daemon_a->save_checkpoint(a, tokens, 1));  // extends the lease by 1 ms only
  std::this_thread::sleep_for(5ms);                // ... and then daemon-a "hangs"

  CHECK_FALSE(daemon_b->claim("daemon-b", kLongLease));  // expired but not yet recovered: not claimable
  const Recovery r = daemon_b->recover_expired(kNoBackoff);
  CHECK(r.requeued == 1);
  CHECK(r.total() == 1);
  Job j = *daemon_b->get(id);
  CHECK(j.state == JobState::queued);
  CHECK(j.worker.empty());
  CHECK(j.attempts == 1);  // the interrupted attempt counts
  CHECK(j.error_kind == "lease_expired");
  CHECK_MESSAGE(j.error.find("daemon-a stopped renewing its lease") != std::string::npos, j.error);

  std::optional<Job> b = daemon_b->claim("daemon-b", kLongLease);
  REQUIRE(b);
  CHECK(b->id == id);
  CHECK(b->attempt == 2);
  CHECK(b->attempts == 2);
  CHECK(b->error.empty());
  std::optional<Checkpoint> cp = daemon_b->checkpoint(id);
  REQUIRE(cp);
  CHECK(cp->tokens == tokens);  // daemon-b resumes where daemon-a left off
  CHECK(cp->attempt == 1);

  // daemon-a wakes up: every write it tries is refused.
  CHECK_FALSE(daemon_a->heartbeat(a, kLongLease));
  CHECK_FALSE(daemon_a->save_checkpoint(a, std::vector<int32_t>{1}, kLongLease));
  CHECK_FALSE(daemon_a->complete(a, result("from a")));
  CHECK(daemon_b->complete(b->lease(), result("from b")));
  j = *daemon_a->get(id);
  CHECK(j.state == JobState::done);
  CHECK(j.result->text == "from b");
  CHECK_FALSE(daemon_a->checkpoint(id));  // a finished job keeps no checkpoint

  const std::vector<AttemptRecord> history = daemon_a->attempts(id);
  REQUIRE(history.size() == 2);
  CHECK(history[0].worker == "daemon-a");
  CHECK(history[0].outcome == "lease_expired");
  CHECK(history[0].ended_ms > 0);
  CHECK(history[0].resumed_tokens == 0);
  CHECK(history[1].worker == "daemon-b");
  CHECK(history[1].outcome == "done");
  CHECK(history[1].resumed_tokens == 4);
}

QUEUE_TEST("a job whose lease expires max_attempts times is dead, with its history") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t poison = q->submit(spec("crashes the daemon", 2)).id;
  const int64_t other = q->submit(spec("fine")).id;

  claim_and_let_expire(*q, "w");
  CHECK(q->recover_expired(kNoBackoff).requeued == 1);
  const Lease second = claim_and_let_expire(*q, "w");
  CHECK(second.job_id == poison);
  CHECK(q->save_checkpoint(second, std::vector<int32_t>{1, 2}, 1));
  std::this_thread::sleep_for(5ms);
  const Recovery r = q->recover_expired(kNoBackoff);
  CHECK(r.dead == 1);
  CHECK(r.requeued == 0);

  const Job j = *q->get(poison);
  CHECK(j.state == JobState::dead);
  CHECK(j.finished_ms > 0);
  CHECK(j.attempts == 2);
  CHECK(j.error_kind == "lease_expired");
  CHECK_MESSAGE(j.error.find("attempt 2 of 2; no attempts left") != std::string::npos, j.error);
  CHECK_MESSAGE(j.error.find("nightshift retry " + std::to_string(poison)) != std::string::npos, j.error);
  REQUIRE(q->checkpoint(poison));  // a dead job keeps its work: retry resumes it
  CHECK(q->checkpoint(poison)->tokens == std::vector<int32_t>{1, 2});
  CHECK(q->attempts(poison).size() == 2);
  CHECK(q->counts().dead == 1);

  // The rest of the queue is not held up.
  std::optional<Job> next = q->claim("w", kLongLease);
  REQUIRE(next);
  CHECK(next->id == other);
}

QUEUE_TEST("a crash beside other jobs is charged to none of them; each runs alone next, where a crash counts") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t a = q->submit(spec("a", 1)).id;
  const int64_t b = q->submit(spec("b", 1)).id;
  const int64_t c = q->submit(spec("c", 1)).id;

  // One batch of three under daemon w, which dies: with max_attempts 1 all
  // three would be dead if the crash were charged to each of them.
  REQUIRE(q->claim_batch("w", 1, 3, "").size() == 3);
  std::this_thread::sleep_for(5ms);
  const Recovery r = q->recover_expired(kNoBackoff);
  CHECK(r.requeued == 3);
  CHECK(r.dead == 0);
  for (int64_t id : {a, b, c}) {
    CAPTURE(id);
    const Job j = *q->get(id);
    CHECK(j.state == JobState::queued);
    CHECK(j.attempts == 0);
    CHECK(j.run_alone);
    const std::vector<AttemptRecord> history = q->attempts(id);
    REQUIRE(history.size() == 1);
    CHECK(history[0].outcome == "lease_expired");
    CHECK_MESSAGE(history[0].error.find("the attempt is not counted and it runs alone next") != std::string::npos,
                  history[0].error);
  }

  // A suspect is claimed only alone, and only by a daemon with nothing running.
  CHECK(q->claim_batch("w2", kLongLease, 3, "tiny").empty());
  std::vector<Job> alone = q->claim_batch("w2", kLongLease, 3, "");
  REQUIRE(alone.size() == 1);
  CHECK(alone[0].id == a);
  CHECK(alone[0].run_alone);
  // It brings w2 down by itself: that crash is its own and counts.
  CHECK(q->recover_worker("w2", kNoBackoff).dead == 1);
  CHECK(q->get(a)->state == JobState::dead);

  // The others run alone and finish; a retried job is an ordinary job again.
  for (int64_t id : {b, c}) {
    std::vector<Job> next = q->claim_batch("w2", kLongLease, 3, "");
    REQUIRE(next.size() == 1);
    CHECK(next[0].id == id);
    CHECK(q->complete(next[0].lease(), result("ok")));
  }
  REQUIRE(q->retry(a) == RetryOutcome::requeued);
  CHECK_FALSE(q->get(a)->run_alone);
}

QUEUE_TEST("crash blame: batch mates whose leases lapse at different times are both unblamed; suspects are not twice") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t early = q->submit(spec("early", 1)).id;
  const int64_t late = q->submit(spec("late", 1)).id;
  claim_lease(*q, "w", 1);           // its lease lapses first
  claim_lease(*q, "w", kLongLease);  // joined the batch later, lease still live when the first is recovered
  std::this_thread::sleep_for(5ms);
  CHECK(q->recover_expired(kNoBackoff).requeued == 1);  // `late` still open beside it
  CHECK(q->get(early)->run_alone);
  CHECK(q->get(late)->state == JobState::running);
  CHECK(q->recover_worker("w", kNoBackoff).requeued == 1);  // `early` was lost after `late` began
  CHECK(q->get(late)->run_alone);
  CHECK(q->get(late)->attempts == 0);

  // Two suspects that end up side by side anyway (claim_lease() takes the head one
  // at a time) are charged: suspicion is given once.
  CHECK(claim_lease(*q, "w3").job_id == early);
  CHECK(claim_lease(*q, "w3").job_id == late);
  const Recovery r = q->recover_worker("w3", kNoBackoff);
  CHECK(r.dead == 2);
}

QUEUE_TEST("retry resumes a dead job from its checkpoint unless its model changes") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t same = q->submit(spec("same", 1)).id;
  const int64_t moved = q->submit(spec("moved", 1)).id;
  for (int i = 0; i < 2; ++i) {
    const Lease l = claim_lease(*q, "w");
    REQUIRE(q->save_checkpoint(l, std::vector<int32_t>{7, 8, 9}, kLongLease));
    REQUIRE(q->fail_transient(l, "io", "disk gone", kNoBackoff) == JobState::dead);
  }
  REQUIRE(q->retry(same) == RetryOutcome::requeued);
  REQUIRE(q->retry(moved, "other-model") == RetryOutcome::requeued);
  REQUIRE(q->checkpoint(same));
  CHECK(q->checkpoint(same)->tokens == std::vector<int32_t>{7, 8, 9});
  CHECK_FALSE(q->checkpoint(moved));  // token ids of another model's vocabulary mean nothing
  const std::optional<Job> again = q->claim("w", kLongLease);
  REQUIRE(again);
  CHECK(again->id == same);
  CHECK(q->attempts(same).back().resumed_tokens == 3);
}

QUEUE_TEST("recovery leaves live leases alone and waits out the backoff") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t live = q->submit(spec("live")).id;
  const int64_t crashed = q->submit(spec("crashed")).id;
  const Lease l = claim_lease(*q, "alive");
  REQUIRE(l.job_id == live);
  claim_and_let_expire(*q, "gone");

  const int64_t before = now_epoch_ms();
  const Recovery r = q->recover_expired(Backoff{60'000, 600'000});
  CHECK(r.requeued == 1);
  CHECK(q->get(live)->state == JobState::running);
  const Job j = *q->get(crashed);
  CHECK(j.state == JobState::queued);
  // First failure: base 60 s with equal jitter, so 30..60 s from now.
  CHECK(j.spec.not_before_ms >= before + 30'000);
  CHECK(j.spec.not_before_ms <= now_epoch_ms() + 60'000);
  CHECK_FALSE(q->claim("another", kLongLease));  // backing off
  CHECK(q->recover_expired(kNoBackoff).total() == 0);
}

QUEUE_TEST("leases a stopped worker or a backward clock jump left ahead are taken back, uncharged") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t stopped = q->submit(spec("its worker stopped")).id;
  const int64_t jumped = q->submit(spec("its worker beat before the clock went back")).id;
  const int64_t live = q->submit(spec("its worker is alive")).id;
  for (const char* w : {"w-stopped", "w-jumped", "w-live"}) {
    WorkerInfo info;
    info.id = w;
    info.host = "h";
    info.version = "test";
    REQUIRE(q->register_worker(info).empty());
    claim_lease(*q, w, kLongLease);
  }
  q->worker_stopped("w-stopped");
  // Its last heartbeat and lease were stamped by a clock two hours ahead of today's.
  const std::string later = std::to_string(now_epoch_ms() + 2 * 3'600'000);
  db.query("UPDATE workers SET heartbeat_ms = " + later + " WHERE id = 'w-jumped'");
  db.query("UPDATE jobs SET lease_expires_ms = " + later + " WHERE id = " + std::to_string(jumped));

  const Recovery r = q->recover_expired(kNoBackoff);
  CHECK(r.requeued == 2);
  for (int64_t id : {stopped, jumped}) {
    const Job j = *q->get(id);
    CHECK(j.state == JobState::queued);
    CHECK(j.attempts == 0);  // no fault of the job's
    CHECK(q->attempts(id).back().error.find("cannot renew the lease") != std::string::npos);
  }
  CHECK(q->get(live)->state == JobState::running);
  CHECK(q->recover_expired(kNoBackoff).total() == 0);
}

QUEUE_TEST("recover_worker takes back one worker's jobs at once, expired or not") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t mine = q->submit(spec("mine")).id;
  const int64_t mine_cancelled = q->submit(spec("mine, cancel requested")).id;
  const int64_t theirs = q->submit(spec("theirs")).id;
  claim_lease(*q, "host:worker-1");
  claim_lease(*q, "host:worker-1");
  claim_lease(*q, "host:worker-2");
  REQUIRE(q->cancel(mine_cancelled));

  const Recovery r = q->recover_worker("host:worker-1", kNoBackoff);
  CHECK(r.requeued == 1);
  CHECK(r.cancelled == 1);
  CHECK(q->get(mine)->state == JobState::queued);
  CHECK(q->get(mine)->attempts == 0);  // it ran beside another job: the crash is not charged to it
  CHECK(q->get(mine)->run_alone);
  CHECK(q->get(mine_cancelled)->state == JobState::cancelled);
  CHECK(q->get(theirs)->state == JobState::running);  // another live worker's job is untouched
  CHECK(q->attempts(mine)[0].outcome == "abandoned");
  CHECK(q->recover_worker("host:worker-1", kNoBackoff).total() == 0);

  std::optional<Job> again = q->claim("host:worker-1", kLongLease);
  REQUIRE(again);
  CHECK(again->id == mine);
  CHECK(again->attempts == 1);
  CHECK(again->attempt == 2);
  // Alone this time: its crash counts.
  CHECK(q->recover_worker("host:worker-1", kNoBackoff).requeued == 1);
  CHECK(q->get(mine)->attempts == 1);
  CHECK(q->get(mine)->error_kind == "abandoned");
}

QUEUE_TEST("a transient failure retries after an exponential backoff, then the job is dead") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t id = q->submit(spec("p", 3)).id;
  const Backoff backoff{150, 10'000};

  Lease l = claim_lease(*q, "w");
  CHECK(q->save_checkpoint(l, std::vector<int32_t>{9, 9}, kLongLease));
  int64_t t0 = now_epoch_ms();
  CHECK(q->fail_transient(l, "io", "read failed: Input/output error", backoff) == JobState::queued);
  Job j = *q->get(id);
  CHECK(j.state == JobState::queued);
  CHECK(j.error_kind == "io");  // why it is waiting
  CHECK(j.spec.not_before_ms >= t0 + 75);
  CHECK(j.spec.not_before_ms <= now_epoch_ms() + 150);
  CHECK(q->checkpoint(id));  // a retry resumes
  CHECK_FALSE(q->claim("w", kLongLease));
  while (now_epoch_ms() < j.spec.not_before_ms) std::this_thread::sleep_for(5ms);

  l = claim_lease(*q, "w");
  t0 = now_epoch_ms();
  CHECK(q->fail_transient(l, "database", "locked", backoff) == JobState::queued);
  j = *q->get(id);
  CHECK(j.spec.not_before_ms >= t0 + 150);  // the second delay is twice the first step
  CHECK(j.spec.not_before_ms <= now_epoch_ms() + 300);
  while (now_epoch_ms() < j.spec.not_before_ms) std::this_thread::sleep_for(5ms);

  l = claim_lease(*q, "w");
  CHECK(q->fail_transient(l, "io", "read failed again", backoff) == JobState::dead);
  j = *q->get(id);
  CHECK(j.state == JobState::dead);
  CHECK(j.error_kind == "io");
  CHECK_MESSAGE(j.error.find("read failed again (attempt 3 of 3; no attempts left") == 0, j.error);
  CHECK(q->checkpoint(id));  // kept for a retry
  const std::vector<AttemptRecord> history = q->attempts(id);
  REQUIRE(history.size() == 3);
  for (const AttemptRecord& a : history) CHECK(a.outcome == "transient_error");
  CHECK(history[0].error == "read failed: Input/output error");
  CHECK(history[1].error_kind == "database");
}

QUEUE_TEST("a permanent failure ends the job at once, whatever attempts are left") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t id = q->submit(spec("p", 5)).id;
  CHECK(q->fail(claim_lease(*q, "w"), "bad_model", "tensor past end of file"));
  const Job j = *q->get(id);
  CHECK(j.state == JobState::failed);
  CHECK(j.attempts == 1);
  CHECK(q->attempts(id)[0].outcome == "failed");
  CHECK(q->attempts(id)[0].error_kind == "bad_model");
  CHECK_FALSE(q->claim("w", kLongLease));
}

QUEUE_TEST("a cancel requested while the job ran wins over a retry or a recovery") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t a = q->submit(spec("a")).id;
  const int64_t b = q->submit(spec("b")).id;
  const Lease la = claim_lease(*q, "w");
  claim_and_let_expire(*q, "w");
  REQUIRE(q->cancel(a));
  REQUIRE(q->cancel(b));
  CHECK(q->fail_transient(la, "io", "x", kNoBackoff) == JobState::cancelled);
  CHECK(q->recover_expired(kNoBackoff).cancelled == 1);
  CHECK(q->get(a)->state == JobState::cancelled);
  CHECK(q->get(b)->state == JobState::cancelled);
  CHECK(q->counts().cancelled == 2);
}

QUEUE_TEST("retry queues failed, dead and cancelled jobs as new; other states are refused") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t failed = q->submit(spec("failed")).id;
  const int64_t dead = q->submit(spec("dead", 1)).id;
  const int64_t cancelled = q->submit(spec("cancelled while running")).id;
  const int64_t done = q->submit(spec("done")).id;
  const int64_t queued = q->submit(spec("queued")).id;

  REQUIRE(q->fail(claim_lease(*q, "w"), "invalid_input", "bad"));
  REQUIRE(q->fail_transient(claim_lease(*q, "w"), "io", "gone", kNoBackoff) == JobState::dead);
  const Lease lc = claim_lease(*q, "w");
  REQUIRE(q->cancel(cancelled));
  REQUIRE(q->finish_cancelled(lc, result("partial")));
  REQUIRE(q->complete(claim_lease(*q, "w"), result("text")));

  for (int64_t id : {failed, dead, cancelled}) {
    CAPTURE(id);
    CHECK(q->retry(id) == RetryOutcome::requeued);
    const Job j = *q->get(id);
    CHECK(j.state == JobState::queued);
    CHECK(j.attempts == 0);
    CHECK(j.attempt == 1);  // claim numbers go on from where they were
    CHECK(j.error.empty());
    CHECK(j.finished_ms == 0);
    CHECK_FALSE(j.cancel_requested);
    CHECK_FALSE(j.result);
    CHECK(q->attempts(id).size() == 1);  // history kept
  }
  CHECK(q->retry(done) == RetryOutcome::not_retryable);
  CHECK(q->retry(queued) == RetryOutcome::not_retryable);
  CHECK(q->retry(999) == RetryOutcome::not_found);
  CHECK(q->get(done)->result->text == "text");

  // A retried job keeps its place (oldest first) and runs again as attempt 2.
  std::optional<Job> again = q->claim("w", kLongLease);
  REQUIRE(again);
  CHECK(again->id == failed);
  CHECK(again->attempt == 2);
  CHECK(again->attempts == 1);
}

QUEUE_TEST("checkpoints are replaced by the holder, kept on release and recovery, dropped at the end") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t id = q->submit(spec("p")).id;
  Lease l = claim_lease(*q, "w");
  CHECK_FALSE(q->checkpoint(id));
  CHECK(q->save_checkpoint(l, std::vector<int32_t>{1, 2, 3}, kLongLease));
  const int64_t t = now_epoch_ms();
  std::vector<int32_t> more = {1, 2, 3, 4, 5, 60000, 0};
  CHECK(q->save_checkpoint(l, more, kLongLease));
  std::optional<Checkpoint> cp = q->checkpoint(id);
  REQUIRE(cp);
  CHECK(cp->tokens == more);
  CHECK(cp->saved_ms >= t);

  CHECK(q->release(l));
  CHECK(q->get(id)->attempts == 0);
  CHECK(q->checkpoint(id)->tokens == more);  // a drained job resumes
  l = claim_lease(*q, "w");
  CHECK(q->attempts(id)[1].resumed_tokens == 7);
  CHECK(q->attempts(id)[0].outcome == "released");
  CHECK(q->complete(l, result("x")));
  CHECK_FALSE(q->checkpoint(id));

  CHECK(db.scalar("SELECT count(*) FROM checkpoints") == 0);
}

QUEUE_TEST("two workers on their own connections: a heartbeated lease keeps the job with one of them") {
  QUEUE_BACKEND(db);
  auto setup = db.open();
  const int64_t id = setup->submit(spec("long job")).id;

  // Waits on state, not on a guess of time: the rival polls until the lease
  // the holder claimed would have lapsed twice over without heartbeats and
  // the holder has sent kBeats of them (however long a loaded machine takes),
  // and afterwards until the lapsed lease is recovered. The lease is long
  // against the 15 ms between beats so that a holder descheduled for a while
  // keeps it.
  constexpr int kBeats = 8;
  constexpr int64_t kHolderLeaseMs = 1000;
  const int64_t claimed_at_ms = now_epoch_ms();
  const auto deadline = std::chrono::steady_clock::now() + 120s;  // a hang fails instead of blocking the suite
  std::atomic<bool> holder_running{true};
  std::atomic<int> beats{0};
  std::atomic<int> claim_state{0};  // 0 claiming, 1 holds the job, 2 got nothing
  std::thread holder([&] {
    auto q = db.open();
    const std::optional<Job> held = q->claim("holder", kHolderLeaseMs);
    claim_state = held ? 1 : 2;
    if (!held) return;
    while (holder_running.load()) {
      if (q->heartbeat(held->lease(), kHolderLeaseMs)) ++beats;
      std::this_thread::sleep_for(15ms);
    }
  });
  while (claim_state.load() == 0) std::this_thread::sleep_for(1ms);
  if (claim_state.load() != 1) holder.join();  // it has returned already
  REQUIRE(claim_state.load() == 1);

  auto rival = db.open();
  int tries = 0, recovered = 0, claimed = 0;
  const auto held_long_enough = [&] {
    return beats.load() >= kBeats && now_epoch_ms() > claimed_at_ms + 2 * kHolderLeaseMs;
  };
  while (!held_long_enough() && std::chrono::steady_clock::now() < deadline) {  // polling as fast as it can
    recovered += static_cast<int>(rival->recover_expired(kNoBackoff).total());
    claimed += rival->claim("rival", kLongLease) ? 1 : 0;
    ++tries;
  }
  holder_running = false;
  holder.join();
  MESSAGE("rival polled " << tries << " times while the holder sent " << beats.load() << " heartbeats");
  CHECK(beats.load() >= kBeats);
  CHECK(recovered == 0);
  CHECK(claimed == 0);
  CHECK(rival->get(id)->worker == "holder");

  // The holder stops heartbeating (killed): the rival takes over once the lease lapses.
  int requeued = 0;
  while (requeued == 0 && std::chrono::steady_clock::now() < deadline) {
    requeued = static_cast<int>(rival->recover_expired(kNoBackoff).requeued);
    if (requeued == 0) std::this_thread::sleep_for(10ms);
  }
  CHECK(requeued == 1);
  std::optional<Job> taken = rival->claim("rival", kLongLease);
  REQUIRE(taken);
  CHECK(taken->id == id);
  CHECK(rival->attempts(id).size() == 2);
}
