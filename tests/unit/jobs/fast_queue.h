// Queue options for tests about queue logic rather than durability: commits
// without an fsync each, so the suite stays fast. (sqlite_schema_test.cpp
// checks the durable default; the integration tests run the real binaries.)
// And the jobs those tests submit.
#pragma once

#include <string>

#include "jobs/queue.h"
#include "jobs/sqlite_queue.h"

namespace ns::test {

inline const jobs::SqliteOptions kFastCommits{.busy_timeout_ms = 5000, .synchronous = jobs::Synchronous::normal};

// A completion job: `prompt` for `model`, everything else the defaults.
inline jobs::JobSpec job_spec(const std::string& model, const std::string& prompt) {
  jobs::JobSpec s;
  s.model = model;
  s.prompt = prompt;
  return s;
}

// A completion job that generates exactly `max_tokens` tokens (a random
// model may emit EOS at once; the tests want a known length).
inline jobs::JobSpec generation_spec(const std::string& model, const std::string& prompt, int max_tokens) {
  jobs::JobSpec s = job_spec(model, prompt);
  s.sampling.max_tokens = max_tokens;
  s.sampling.ignore_eos = true;
  return s;
}

}  // namespace ns::test
