// The queue contract on both backends (tests/unit/jobs/backends.h: a real
// SQLite file, a real PostgreSQL database): submit, claim order, idempotency,
// the state machine (cancel, release, fail, complete), list and counts.
// Leases, fencing, recovery and retries: queue_lease_test.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "jobs/queue.h"
#include "jobs/time_format.h"
#include "tests/unit/jobs/backends.h"

namespace {

using namespace ns::jobs;

JobSpec spec(const std::string& prompt, int32_t priority = 0, const std::string& key = "") {
  JobSpec s = ns::test::job_spec("tiny", prompt);
  s.priority = priority;
  s.idempotency_key = key;
  return s;
}

constexpr int64_t kLeaseMs = 60'000;

using ns::test::claim_lease;

JobResult sample_result() {
  return {.text = "line one\nline two " + std::string(100, 'x'),
          .finish_reason = "length",
          .prompt_tokens = 7,
          .completion_tokens = 33,
          .queue_wait_ms = 12.5,
          .load_ms = 140.25,
          .prefill_ms = 20,
          .decode_ms = 500,
          .prefill_tok_s = 350,
          .decode_tok_s = 66,
          .peak_rss_bytes = 123456789,
          .bytes_read = 9876543210ULL};
}

}  // namespace

QUEUE_TEST("a job's grammar is stored, claimed with the job, and part of its content") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  JobSpec s = spec("Extract:");
  s.sampling.grammar = "root ::= \"{\" [^}]* \"}\"  # ünïcode comment\n";
  s.idempotency_key = "g-1";
  const SubmitOutcome out = q->submit(s);
  CHECK(q->get(out.id)->spec.sampling.grammar == s.sampling.grammar);
  const std::optional<Job> claimed = q->claim("w", kLeaseMs);
  REQUIRE(claimed);
  CHECK(claimed->spec.sampling.grammar == s.sampling.grammar);
  JobSpec plain = spec("Extract:");
  CHECK(spec_difference(q->get(out.id)->spec, plain) == "sampling (grammar)");
  JobSpec nul = spec("x");
  nul.sampling.grammar = std::string("root ::= \"a\"\0", 14);
  CHECK_THROWS_WITH_AS(q->submit(nul), doctest::Contains("NUL byte"), ns::Error);
}

QUEUE_TEST("submit stores every field and get() reads it back") {
  QUEUE_BACKEND(db);
  auto q = db.open();

  JobSpec s = spec("Once upon a time, \"quoted\" and ünïcode");
  s.sampling.max_tokens = 77;
  s.sampling.temperature = 0.3f;
  s.sampling.top_k = 12;
  s.sampling.top_p = 0.5f;
  s.sampling.min_p = 0.01f;
  s.sampling.repeat_penalty = 1.1f;
  s.sampling.repeat_last_n = 32;
  s.sampling.seed = 0xfedcba9876543210ULL;  // above INT64_MAX: must survive the signed column
  s.sampling.stop = {"\n\n", "THE END", "\"]"};
  s.sampling.ignore_eos = true;
  s.priority = -3;
  s.idempotency_key = "doc-42";

  const int64_t before = now_epoch_ms();
  SubmitOutcome out = q->submit(s);
  const int64_t after = now_epoch_ms();
  CHECK(out.created);
  CHECK(out.id > 0);

  std::optional<Job> job = q->get(out.id);
  REQUIRE(job);
  CHECK(job->id == out.id);
  CHECK(job->spec.model == "tiny");
  CHECK(job->spec.prompt == s.prompt);
  CHECK(job->spec.sampling.max_tokens == 77);
  CHECK(job->spec.sampling.temperature == 0.3f);
  CHECK(job->spec.sampling.top_k == 12);
  CHECK(job->spec.sampling.top_p == 0.5f);
  CHECK(job->spec.sampling.min_p == 0.01f);
  CHECK(job->spec.sampling.repeat_penalty == 1.1f);
  CHECK(job->spec.sampling.repeat_last_n == 32);
  CHECK(job->spec.sampling.seed == 0xfedcba9876543210ULL);
  CHECK(job->spec.sampling.stop == s.sampling.stop);
  CHECK(job->spec.sampling.ignore_eos);
  CHECK(job->spec.priority == -3);
  CHECK(job->spec.idempotency_key == "doc-42");
  CHECK(job->state == JobState::queued);
  CHECK(job->created_ms >= before);
  CHECK(job->created_ms <= after);
  CHECK(job->started_ms == 0);
  CHECK(job->finished_ms == 0);
  CHECK(job->attempts == 0);
  CHECK_FALSE(job->cancel_requested);
  CHECK_FALSE(job->result);

  CHECK_FALSE(q->get(out.id + 1000));
}

QUEUE_TEST("submit rejects bad specs before touching the database") {
  QUEUE_BACKEND(db);
  auto q = db.open();

  auto expect_invalid = [&](const JobSpec& s, const std::string& needle) {
    try {
      q->submit(s);
      FAIL("submit accepted a bad spec: " << needle);
    } catch (const ns::Error& e) {
      CHECK(e.kind() == ns::ErrorKind::invalid_input);
      CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  JobSpec no_model = spec("hello");
  no_model.model.clear();
  expect_invalid(no_model, "model");
  expect_invalid(spec(""), "prompt");
  JobSpec hot = spec("hello");
  hot.sampling.temperature = -1.0f;
  expect_invalid(hot, "temperature");
  JobSpec zero = spec("hello");
  zero.sampling.max_tokens = 0;
  expect_invalid(zero, "max_tokens");

  const QueueCounts c = q->counts();
  CHECK(c.queued + c.running + c.done + c.failed + c.cancelled == 0);
}

QUEUE_TEST("submit refuses prompts that are not UTF-8, too long, and out-of-range attempts") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  auto problem = [&](const JobSpec& s) -> std::string {
    try {
      q->submit(s);
    } catch (const ns::Error& e) {
      CHECK(e.kind() == ns::ErrorKind::invalid_input);
      return e.what();
    }
    return "";
  };
  CHECK(problem(spec("caf\xc3")).find("not valid UTF-8 (bad byte sequence at byte 3)") != std::string::npos);
  CHECK(problem(spec("\xff prompt")).find("at byte 0") != std::string::npos);
  CHECK(problem(spec("overlong \xc0\xaf")).find("at byte 9") != std::string::npos);
  CHECK(problem(spec("surrogate \xed\xa0\x80")).find("at byte 10") != std::string::npos);
  CHECK(problem(spec(std::string(kMaxPromptBytes + 1, 'x'))).find("at most 8388608 bytes") != std::string::npos);
  JobSpec bad_stop = spec("fine");
  bad_stop.sampling.stop = {"\xfe"};
  CHECK(problem(bad_stop).find("stop[0] is not valid UTF-8") != std::string::npos);
  // NUL: refused by every backend alike (PostgreSQL text cannot hold it; before, SQLite took it).
  CHECK(problem(spec(std::string("a\0b", 3))).find("the prompt holds a NUL byte (at byte 1)") != std::string::npos);
  JobSpec nul_stop = spec("fine");
  nul_stop.sampling.stop = {std::string("x\0", 2)};
  CHECK(problem(nul_stop).find("stop[0] holds a NUL byte") != std::string::npos);
  JobSpec zero_attempts = spec("fine");
  zero_attempts.max_attempts = 0;
  CHECK(problem(zero_attempts).find("max_attempts = 0") != std::string::npos);
  JobSpec nan = spec("fine");
  nan.sampling.top_p = std::numeric_limits<float>::quiet_NaN();
  CHECK(problem(nan).find("top_p") != std::string::npos);
  CHECK(q->counts().queued == 0);

  // The largest prompt allowed, and multi-byte text, go in.
  CHECK(problem(spec(std::string(kMaxPromptBytes, 'x'))).empty());
  CHECK(problem(spec("日本語の文書 \xf0\x9f\x98\x80")).empty());
  CHECK(q->counts().queued == 2);
}

QUEUE_TEST("submit_many queues all or nothing in one transaction") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  std::vector<JobSpec> specs = {spec("a", 0, "k1"), spec("b"), spec("c", 0, "k1")};
  specs[1].max_attempts = 7;
  specs[1].not_before_ms = now_epoch_ms() + 3'600'000;
  const std::vector<SubmitOutcome> out = q->submit_many(specs);
  REQUIRE(out.size() == 3);
  CHECK(out[0].created);
  CHECK(out[1].created);
  CHECK_FALSE(out[2].created);  // the same key twice in one batch names one job
  CHECK(out[2].id == out[0].id);
  CHECK(q->get(out[1].id)->spec.max_attempts == 7);
  CHECK(q->get(out[1].id)->spec.not_before_ms == specs[1].not_before_ms);

  std::vector<JobSpec> with_bad = {spec("d"), spec(""), spec("e")};
  try {
    q->submit_many(with_bad);
    FAIL("a batch with an empty prompt was accepted");
  } catch (const ns::Error& e) {
    CHECK_MESSAGE(std::string(e.what()).find("job 2: the job's prompt is empty") == 0, e.what());
  }
  CHECK(q->counts().queued == 2);

  // The job not before an hour from now waits; the other one is claimable.
  REQUIRE(q->claim("w", kLeaseMs)->id == out[0].id);
  CHECK_FALSE(q->claim("w", kLeaseMs));
}

QUEUE_TEST("claim takes the highest priority first, oldest first within a priority") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t a = q->submit(spec("a", 0)).id;
  const int64_t b = q->submit(spec("b", 5)).id;
  const int64_t c = q->submit(spec("c", 0)).id;
  const int64_t d = q->submit(spec("d", 5)).id;
  const int64_t e = q->submit(spec("e", -1)).id;

  std::vector<int64_t> order;
  while (std::optional<Job> j = q->claim("w1", kLeaseMs)) {
    CHECK(j->state == JobState::running);
    CHECK(j->worker == "w1");
    CHECK(j->attempts == 1);
    CHECK(j->started_ms >= j->created_ms);
    order.push_back(j->id);
  }
  CHECK(order == std::vector<int64_t>{b, d, a, c, e});
  CHECK(q->counts().running == 5);
  CHECK(q->counts().queued == 0);
}

QUEUE_TEST("an idempotency key returns the first job instead of a second one") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  SubmitOutcome first = q->submit(spec("first", 0, "nightly/2025-01-31/doc.txt"));
  SubmitOutcome again = q->submit(spec("changed text", 0, "nightly/2025-01-31/doc.txt"));
  CHECK(first.created);
  CHECK_FALSE(again.created);
  CHECK(again.id == first.id);
  CHECK(q->get(first.id)->spec.prompt == "first");

  SubmitOutcome other = q->submit(spec("other", 0, "another-key"));
  CHECK(other.created);
  CHECK(other.id != first.id);

  // No key: every submit is a new job (NULL keys never collide).
  CHECK(q->submit(spec("x")).id != q->submit(spec("x")).id);
  CHECK(q->counts().queued == 4);

  // The key holds after the job finished, too.
  CHECK(q->complete(claim_lease(*q), sample_result()));
  CHECK(q->submit(spec("later", 0, "nightly/2025-01-31/doc.txt")).id == first.id);
}

QUEUE_TEST("complete stores the result with every stat") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t id = q->submit(spec("p")).id;
  const Lease lease = claim_lease(*q);
  REQUIRE(lease.job_id == id);
  const JobResult r = sample_result();
  CHECK(q->complete(lease, r));

  std::optional<Job> j = q->get(id);
  REQUIRE(j);
  CHECK(j->state == JobState::done);
  CHECK(j->finished_ms >= j->started_ms);
  CHECK(j->error.empty());
  REQUIRE(j->result);
  CHECK(j->result->text == r.text);
  CHECK(j->result->finish_reason == "length");
  CHECK(j->result->prompt_tokens == 7);
  CHECK(j->result->completion_tokens == 33);
  CHECK(j->result->queue_wait_ms == 12.5);
  CHECK(j->result->load_ms == 140.25);
  CHECK(j->result->prefill_ms == 20);
  CHECK(j->result->decode_ms == 500);
  CHECK(j->result->prefill_tok_s == 350);
  CHECK(j->result->decode_tok_s == 66);
  CHECK(j->result->peak_rss_bytes == 123456789);
  CHECK(j->result->bytes_read == 9876543210ULL);

  // A finished job cannot be finished again (the worker must never overwrite a final state).
  CHECK_FALSE(q->complete(lease, r));
  CHECK_FALSE(q->fail(lease, "internal", "late"));
  CHECK_FALSE(q->release(lease));
  CHECK_FALSE(q->finish_cancelled(lease, r));
  CHECK(q->get(id)->state == JobState::done);
  CHECK(q->get(id)->error.empty());
}

QUEUE_TEST("fail records the error and the job is not claimed again") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t id = q->submit(spec("p")).id;
  const Lease lease = claim_lease(*q);
  CHECK(q->fail(lease, "bad_model", "tensor blk.0.attn_q.weight is truncated"));
  std::optional<Job> j = q->get(id);
  CHECK(j->state == JobState::failed);
  CHECK(j->error_kind == "bad_model");
  CHECK(j->error == "tensor blk.0.attn_q.weight is truncated");
  CHECK(j->finished_ms > 0);
  CHECK_FALSE(j->result);
  CHECK_FALSE(q->claim("w", kLeaseMs));

  // A queued (unclaimed) job cannot be failed: only running jobs are the worker's.
  const int64_t queued = q->submit(spec("q")).id;
  CHECK_FALSE(q->fail({queued, "w", 0}, "internal", "x"));
  CHECK(q->get(queued)->state == JobState::queued);
}

QUEUE_TEST("cancel: queued jobs at once, running jobs by request") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t running = q->submit(spec("r", 1)).id;
  const int64_t queued = q->submit(spec("q", 0)).id;
  const Lease lease = claim_lease(*q);
  REQUIRE(lease.job_id == running);

  CHECK(q->cancel(queued));
  std::optional<Job> jq = q->get(queued);
  CHECK(jq->state == JobState::cancelled);
  CHECK(jq->finished_ms > 0);
  CHECK_FALSE(q->claim("w", kLeaseMs));  // the cancelled job is not claimable

  CHECK_FALSE(q->cancel_requested(running));
  CHECK(q->cancel(running));
  CHECK(q->get(running)->state == JobState::running);  // the worker finishes it
  CHECK(q->cancel_requested(running));

  JobResult partial = sample_result();
  partial.finish_reason = "cancelled";
  partial.text = "partial";
  CHECK(q->finish_cancelled(lease, partial));
  std::optional<Job> jr = q->get(running);
  CHECK(jr->state == JobState::cancelled);
  REQUIRE(jr->result);
  CHECK(jr->result->text == "partial");
  CHECK(jr->result->finish_reason == "cancelled");

  // Final or unknown jobs cannot be cancelled.
  CHECK_FALSE(q->cancel(running));
  CHECK_FALSE(q->cancel(queued));
  CHECK_FALSE(q->cancel(999));
  CHECK_FALSE(q->cancel_requested(999));
}

QUEUE_TEST("release puts a running job back in the queue without counting the attempt") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t first = q->submit(spec("first")).id;
  const int64_t second = q->submit(spec("second")).id;
  const Lease lease = claim_lease(*q, "w1");
  REQUIRE(lease.job_id == first);
  CHECK(q->release(lease));

  std::optional<Job> j = q->get(first);
  CHECK(j->state == JobState::queued);
  CHECK(j->attempts == 0);
  CHECK(j->worker.empty());
  CHECK(j->started_ms == 0);
  CHECK_FALSE(j->result);

  // It keeps its place: the oldest job is claimed first again.
  std::optional<Job> again = q->claim("w2", kLeaseMs);
  REQUIRE(again);
  CHECK(again->id == first);
  CHECK(again->worker == "w2");
  CHECK(again->attempts == 1);
  CHECK(again->attempt == 2);      // the claim number never repeats: it is the fence
  CHECK_FALSE(q->release(lease));  // the first claim's lease is long gone

  // A cancel requested while it ran wins over going back to the queue.
  CHECK(q->cancel(first));
  CHECK(q->release(again->lease()));
  CHECK(q->get(first)->state == JobState::cancelled);
  CHECK(q->claim("w2", kLeaseMs)->id == second);
}

QUEUE_TEST("list is newest first, filters by state and honours the limit; counts add up") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(q->submit(spec("job " + std::to_string(i))).id);
  // ids[0] done, ids[1] failed, ids[2] running, ids[3] cancelled, ids[4..5] queued.
  Lease lease = claim_lease(*q);
  REQUIRE(lease.job_id == ids[0]);
  REQUIRE(q->complete(lease, sample_result()));
  lease = claim_lease(*q);
  REQUIRE(lease.job_id == ids[1]);
  REQUIRE(q->fail(lease, "invalid_input", "bad"));
  REQUIRE(q->claim("w", kLeaseMs)->id == ids[2]);
  REQUIRE(q->cancel(ids[3]));

  std::vector<Job> all = q->list({});
  REQUIRE(all.size() == 6);
  for (size_t i = 0; i < all.size(); ++i) CHECK(all[i].id == ids[5 - i]);
  CHECK(all[5].result);  // the done job carries its result

  ListFilter queued_only;
  queued_only.state = JobState::queued;
  std::vector<Job> queued = q->list(queued_only);
  REQUIRE(queued.size() == 2);
  CHECK(queued[0].id == ids[5]);
  CHECK(queued[1].id == ids[4]);

  ListFilter two;
  two.limit = 2;
  CHECK(q->list(two).size() == 2);
  ListFilter unlimited;
  unlimited.limit = 0;
  CHECK(q->list(unlimited).size() == 6);

  const QueueCounts c = q->counts();
  CHECK(c.queued == 2);
  CHECK(c.running == 1);
  CHECK(c.done == 1);
  CHECK(c.failed == 1);
  CHECK(c.cancelled == 1);
}

TEST_CASE("state names round-trip") {
  for (JobState s : kAllJobStates) CHECK(parse_state(state_name(s)) == s);
  CHECK_FALSE(parse_state("finished"));
  CHECK_FALSE(parse_state(""));
}

TEST_CASE("iso8601_utc formats epoch milliseconds") {
  CHECK(iso8601_utc(0).empty());
  CHECK(iso8601_utc(1) == "1970-01-01T00:00:00.001Z");
  CHECK(iso8601_utc(1738361109123) == "2025-01-31T22:05:09.123Z");
  CHECK(iso8601_utc(-1) == "1969-12-31T23:59:59.999Z");
}

QUEUE_TEST("the job_summary view shows one readable line per job") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  const int64_t done = q->submit(spec("p")).id;
  const int64_t failed = q->submit(spec("p")).id;
  q->submit(spec("p"));
  Lease lease = claim_lease(*q);
  REQUIRE(lease.job_id == done);
  REQUIRE(q->complete(lease, sample_result()));
  lease = claim_lease(*q);
  REQUIRE(lease.job_id == failed);
  REQUIRE(q->fail(lease, "bad_model", "truncated file"));

  // SQLite shows times as ISO-8601 text, PostgreSQL as timestamptz: compare
  // the instant each names.
  const std::string created =
      Backend::kPostgres ? "floor(extract(epoch FROM created) * 1000)::bigint AS created" : "created";
  const std::string finished =
      Backend::kPostgres ? "floor(extract(epoch FROM finished) * 1000)::bigint AS finished" : "finished";
  const std::vector<ns::test::Row> rows = db.query("SELECT id, state, model, " + created + ", " + finished +
                                                   ", tokens, tok_s, output, error FROM job_summary ORDER BY id");
  REQUIRE(rows.size() == 3);
  const ns::test::Row& st = rows[0];
  CHECK(st.int64(0) == done);
  CHECK(st.text(1) == "done");
  CHECK(st.text(2) == "tiny");
  if (Backend::kPostgres) {
    CHECK(st.int64(3) == q->get(done)->created_ms);
    CHECK(st.int64(4) == q->get(done)->finished_ms);
  } else {
    CHECK(st.text(3) == iso8601_utc(q->get(done)->created_ms));
    CHECK(st.text(4) == iso8601_utc(q->get(done)->finished_ms));
  }
  CHECK(st.int64(5) == 33);
  CHECK(st.real(6) == 66);
  const std::string output = st.text(7);
  CHECK(output.size() == 80);
  CHECK(output.rfind("line one line two x", 0) == 0);  // newline flattened for one-line display
  CHECK(st.is_null(8));
  CHECK(rows[1].text(1) == "failed");
  CHECK(rows[1].is_null(5));
  CHECK(rows[1].text(8) == "bad_model: truncated file");
  CHECK(rows[2].text(1) == "queued");
  CHECK(rows[2].is_null(4));
}

QUEUE_TEST("sampling values are stored as the decimals that were asked, and read back bit for bit") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  JobSpec s = ns::test::job_spec("tiny", "p");
  s.sampling.temperature = 0.7f;
  s.sampling.top_p = 0.95f;
  s.sampling.min_p = 0.05f;
  s.sampling.repeat_penalty = 1.1f;
  const int64_t id = q->submit(s).id;
  // Before: 0.699999988079071 and the like, the float's binary value widened to a double.
  CHECK(db.scalar("SELECT CASE WHEN temperature = 0.7 AND top_p = 0.95 AND min_p = 0.05 AND repeat_penalty = 1.1 "
                  "THEN 1 ELSE 0 END FROM jobs WHERE id = " +
                  std::to_string(id)) == 1);
  const Job j = *q->get(id);
  CHECK(j.spec.sampling.temperature == 0.7f);
  CHECK(j.spec.sampling.top_p == 0.95f);
  CHECK(j.spec.sampling.min_p == 0.05f);
  CHECK(j.spec.sampling.repeat_penalty == 1.1f);
}

QUEUE_TEST("list filters by model") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  for (const char* model : {"kimi", "qwen", "kimi"}) q->submit(ns::test::job_spec(model, "p"));
  ListFilter f;
  f.model = "kimi";
  const std::vector<Job> kimi = q->list(f);
  REQUIRE(kimi.size() == 2);
  for (const Job& j : kimi) CHECK(j.spec.model == "kimi");
  f.model = "none";
  CHECK(q->list(f).empty());
  CHECK(q->list(ListFilter{}).size() == 3);
}
