// The queue and its workers' recorded stats as Prometheus metrics, in the
// text exposition format (version 0.0.4): a server's `/metrics` and
// `nightshift status --prometheus` write the same bytes.
//
// Contract: metrics_text() is a pure function of a snapshot taken with
// metrics_request() (daemon/lib/status_snapshot.h). Every family has its
// # HELP and # TYPE lines once, before its samples; label values are valid
// UTF-8 with `\`, `"` and newlines escaped as the format asks; a family
// without samples (no model has results yet) keeps its HELP and TYPE lines.
// Counters are sums over the results the queue holds (`nightshift prune`
// removes results, so they may go down: Prometheus treats that as a reset).
// Rates and shares come from sums (each job's stats are its share of the
// batched steps it took part in), never from averaging per-job rates.
//
// The families (model = the job's model, worker = a daemon's worker_id):
//   nightshift_jobs{model,state}                    gauge    jobs by state
//   nightshift_jobs_retry_waiting                   gauge    queued jobs waiting out a retry backoff
//   nightshift_results_total{model}                 counter  jobs with a result
//   nightshift_tokens_generated_total{model}        counter  completion tokens of those results
//   nightshift_prompt_tokens_total{model}           counter  their prompt tokens
//   nightshift_decode_tokens_per_second{model}      gauge    completion tokens over the time their batches decoded
//   nightshift_tokens_per_second{worker}            gauge    the decode rate of the jobs running now
//   nightshift_batch_size{worker}                   gauge    jobs a live daemon runs together now
//   nightshift_batch_size_mean{model}               gauge    jobs decoded together, token-weighted mean
//   nightshift_read_bytes_total{model}              counter  weight bytes read from disk
//   nightshift_read_bytes_per_second{model}         gauge    those bytes over the engine time (I/O wait + compute)
//   nightshift_io_wait_ratio{model}                 gauge    I/O wait / (I/O wait + compute)
//   nightshift_expert_cache_hit_ratio{model}        gauge    expert-cache hit rate, token-weighted mean
//   nightshift_queue_wait_seconds{model}            summary  _sum and _count: time from submit to claim
//   nightshift_worker_up{worker}                    gauge    1 running (heartbeat within 3 min), 0 otherwise
//   nightshift_worker_heartbeat_timestamp_seconds{worker} gauge the last heartbeat (unix time)
#pragma once

#include <string>
#include <string_view>

#include "daemon/lib/status_snapshot.h"

namespace ns::daemon {

// The HTTP Content-Type of metrics_text().
inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// What metrics_text() reads: counts, running jobs, workers and every model's totals.
StatusRequest metrics_request();

std::string metrics_text(const StatusSnapshot& s);

// A label value as the format writes it between its quotes.
std::string escape_label_value(std::string_view value);

}  // namespace ns::daemon
