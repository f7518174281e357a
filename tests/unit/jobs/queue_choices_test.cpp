// What the choices_logprobs migration (schema/*/NNN_choices_logprobs.sql) added to the queue contract, on
// both backends: a job's n and logprobs settings, the choices and logprob
// records of its result, and those of its checkpoint (the records a resumed
// job continues from), stored and read back exactly.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/sampler/logprobs.h"
#include "jobs/queue.h"
#include "tests/unit/jobs/backends.h"

namespace {

using namespace ns::jobs;

constexpr int64_t kLeaseMs = 60'000;

std::string records(int tokens) {
  ns::sampler::LogprobRecorder rec(2, 8);
  std::vector<ns::sampler::ChoiceLogprobs> c(2);
  for (int t = 0; t < tokens; ++t) {
    rec.observe(std::vector<float>{0.5f * t, 1, 2, 3, 4, 5, 6, -7});
    rec.append(t % 8, c[0]);
    rec.append(7 - t % 8, c[1]);
  }
  return ns::sampler::encode_logprobs(c);
}

}  // namespace

QUEUE_TEST("n, logprobs, the result's choices and records, and the checkpoint's, round-trip exactly") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  JobSpec s = ns::test::job_spec("m", "Once");
  s.sampling.n = 2;
  s.sampling.logprobs = true;
  s.sampling.top_logprobs = 20;
  const int64_t id = q->submit(s).id;
  JobSpec plain = s;
  plain.prompt = "plain";
  plain.sampling.n = 1;
  plain.sampling.logprobs = false;
  plain.sampling.top_logprobs = 0;
  const int64_t plain_id = q->submit(plain).id;
  {
    const Job j = *q->get(id);
    CHECK(j.spec.sampling.n == 2);
    CHECK(j.spec.sampling.logprobs);
    CHECK(j.spec.sampling.top_logprobs == 20);
    const Job p = *q->get(plain_id);
    CHECK(p.spec.sampling.n == 1);
    CHECK_FALSE(p.spec.sampling.logprobs);
  }
  // The same key with other choices or logprobs is another request.
  JobSpec keyed = s;
  keyed.idempotency_key = "k";
  q->submit(keyed);
  keyed.sampling.n = 3;
  CHECK(spec_difference(q->get(q->submit(keyed).id)->spec, keyed) == "sampling (n)");

  const auto job = q->claim("w", kLeaseMs);
  REQUIRE(job);
  REQUIRE(job->id == id);
  Checkpoint cp;
  cp.tokens = {1, 2, 3};
  cp.more_tokens = {{4, 5}};
  cp.logprobs = records(3);
  REQUIRE(q->save_checkpoint(job->lease(), cp, kLeaseMs));
  {
    const Checkpoint back = *q->checkpoint(id);
    CHECK(back.tokens == cp.tokens);
    CHECK(back.more_tokens == cp.more_tokens);
    CHECK(back.logprobs == cp.logprobs);
    CHECK(ns::sampler::decode_logprobs(back.logprobs).size() == 2);
  }
  // A later checkpoint without records or choices replaces them (nothing stale is left).
  REQUIRE(q->save_checkpoint(job->lease(), std::vector<int32_t>{1, 2, 3, 4}, kLeaseMs));
  {
    const Checkpoint back = *q->checkpoint(id);
    CHECK(back.tokens.size() == 4);
    CHECK(back.more_tokens.empty());
    CHECK(back.logprobs.empty());
  }
  JobResult r{.text = "choice zero",
              .finish_reason = "length",
              .prompt_tokens = 2,
              .completion_tokens = 7,
              .more_choices = {{"choice \"one\" \xC3\xA9", "stop", 3}},
              .logprobs = records(4)};
  REQUIRE(q->complete(job->lease(), r));
  const Job done = *q->get(id);
  REQUIRE(done.result);
  CHECK(done.result->text == "choice zero");
  CHECK(done.result->completion_tokens == 7);
  CHECK(done.result->more_choices == r.more_choices);
  CHECK(done.result->logprobs == r.logprobs);
  CHECK_FALSE(q->checkpoint(id));

  // A plain job's result has neither.
  const auto p = q->claim("w", kLeaseMs);
  REQUIRE(p);
  JobResult pr{.text = "x", .finish_reason = "stop"};
  REQUIRE(q->complete(p->lease(), pr));
  const Job pd = *q->get(p->id);
  CHECK(pd.result->more_choices.empty());
  CHECK(pd.result->logprobs.empty());
}

// A sampled text may reach a NUL byte: PostgreSQL's jsonb refused `\u0000` in results.choices (SQLSTATE 22P05) and
// the daemon that finished the job exited, each time the job came back. One rule on both backends: the text and
// every choice's text are stored with U+FFFD for each NUL, as for an invalid byte (jobs/valid_utf8.h).
QUEUE_TEST("a NUL in the text or a choice is stored as U+FFFD, on both backends") {
  QUEUE_BACKEND(db);
  auto q = db.open();
  JobSpec s = ns::test::job_spec("m", "Once");
  s.sampling.n = 3;
  const int64_t id = q->submit(s).id;
  const auto job = q->claim("w", kLeaseMs);
  REQUIRE(job);
  REQUIRE(job->id == id);
  using namespace std::string_literals;
  JobResult r{.text = "zero\0zero"s,
              .finish_reason = "length",
              .prompt_tokens = 2,
              .completion_tokens = 3,
              .more_choices = {{"one\0"s, "stop", 2}, {"\0two \xC3"s, "length", 3}}};
  REQUIRE(q->complete(job->lease(), r));
  const Job done = *q->get(id);
  REQUIRE(done.result);
  CHECK(done.state == JobState::done);
  CHECK(done.result->text == "zero\xEF\xBF\xBDzero");
  REQUIRE(done.result->more_choices.size() == 2);
  CHECK(done.result->more_choices[0].text == "one\xEF\xBF\xBD");
  CHECK(done.result->more_choices[1].text == "\xEF\xBF\xBDtwo \xEF\xBF\xBD");
  CHECK(done.result->more_choices[1].completion_tokens == 3);
}
