// A real SQLite queue in a fresh temporary folder, for the CLI's workflow
// tests (fast commits: these tests are about what the CLI writes, not about
// durability), and the daemon's side done by hand through the same
// interface (claim, heartbeat with progress, complete, fail).
#pragma once

#include <memory>
#include <string>

#include "jobs/open_queue.h"
#include "jobs/queue.h"
#include "tests/unit/jobs/temp_dir.h"

namespace ns::test {

struct CliQueue {
  TempDir dir;
  std::unique_ptr<jobs::Queue> queue = jobs::open_queue(
      dir.file("q.db"), jobs::SqliteOptions{.busy_timeout_ms = 5000, .synchronous = jobs::Synchronous::normal});

  // Claims the next job and finishes it as done with `text`; returns its id (0 when none was queued).
  int64_t finish_next(const std::string& text, int32_t completion_tokens = 3) {
    auto job = queue->claim("test-worker", 60'000);
    if (!job) return 0;
    const jobs::JobResult r{.text = text,
                            .finish_reason = "length",
                            .prompt_tokens = 5,
                            .completion_tokens = completion_tokens,
                            .decode_ms = 1000,
                            .decode_tok_s = static_cast<double>(completion_tokens)};  // over one second
    queue->complete(job->lease(), r);
    return job->id;
  }
  // Claims the next job and fails it permanently.
  int64_t fail_next(const std::string& kind, const std::string& message) {
    auto job = queue->claim("test-worker", 60'000);
    if (!job) return 0;
    queue->fail(job->lease(), kind, message);
    return job->id;
  }
};

}  // namespace ns::test
