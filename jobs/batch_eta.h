// A named batch's ETA: when its last job ends, the queued jobs included. `status`, `watch`, `status --json`
// (batches[].eta_s) and the status page show it; the batch_summary view's `eta_s` is the same formula in SQL
// (schema/sqlite/014_batch_eta.sql, schema/postgres/012_batch_eta.sql; tests/unit/jobs/batch_eta_view_test.cpp
// holds the two together).
//
// Model: the batch goes on at the rate it has gone, the output tokens it produced per second of its active time
// (from its first job's start to now, less the model loads it paid: a load is paid once). What is left is each
// queued job's expected output and each running job's rest, a job's expected output being the mean completion of
// the batch's done jobs, capped at max_tokens (x n choices). Jobs mostly end at an end-of-text token long before
// max_tokens: estimates to max_tokens ran twice too long (#31: +96 % to +102 % at 19 % done). Before any job is
// done the expected output is max_tokens (an upper bound). Held jobs (jobs::is_held) are left out: they wait
// for a fix of a daemon's config, not for the daemon. Measured on simulated and recorded runs:
// docs/watching-progress.md, "The batch ETA".
#pragma once

#include <cstdint>
#include <optional>

namespace ns::jobs {

// What the estimate reads of a batch, all sums over its jobs (and their results).
struct BatchProgress {
  int64_t first_started_ms = 0;    // the earliest start of any of its jobs (0: none started)
  int64_t done = 0;                // done jobs
  int64_t done_tokens = 0;         // their completion tokens
  int64_t result_tokens = 0;       // completion tokens of every result (done, and cancelled ones' partial)
  int64_t running = 0;             // running jobs
  int64_t running_generated = 0;   // tokens they generated so far (their last progress report)
  int64_t running_max_tokens = 0;  // sum of their max_tokens x n
  int64_t queued = 0;              // queued jobs, held ones left out
  int64_t queued_max_tokens = 0;   // sum of their max_tokens x n
  double load_ms = 0;              // model loads the batch's jobs paid
};

// Seconds from now_ms until the batch's last job ends; nullopt when nothing is left to run, or nothing has been
// produced yet (no rate).
std::optional<double> batch_eta_s(const BatchProgress& p, int64_t now_ms);

}  // namespace ns::jobs
