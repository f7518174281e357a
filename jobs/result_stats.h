// The statistics of a job's result, described once (#12 item 4). Each row is
// a `results` column, the JobResult member that holds it (and the same-named
// key of the "result" object of `nightshift show --json`), and the engine
// GenerationStats member the daemon copies it from (null where the worker
// computes it itself: queue_wait_ms, load_ms).
//
// Driven by this table: the results INSERT of both backends, the job SELECT
// and read_job(), the JSON of a job, and the worker's copy from the engine's
// stats. A new statistic is a member in JobResult (and GenerationStats), a
// row here and a migration adding its column (schema/README.md documents it).
// Text and token counts (text, finish_reason, prompt_tokens,
// completion_tokens, choices, logprobs) are not statistics: they stay spelled out.
#pragma once

#include <cstdint>
#include <string>

#include "common/generation_stats.h"
#include "jobs/queue.h"

namespace ns::jobs {

struct ResultStat {
  const char* name;
  double JobResult::*real = nullptr;     // REAL / double precision
  uint64_t JobResult::*bytes = nullptr;  // INTEGER / bigint, stored as signed 64-bit
  double GenerationStats::*engine_real = nullptr;
  uint64_t GenerationStats::*engine_bytes = nullptr;
};

inline constexpr ResultStat kResultStats[] = {
    {"queue_wait_ms", &JobResult::queue_wait_ms},
    {"load_ms", &JobResult::load_ms},
    {"prefill_ms", &JobResult::prefill_ms, nullptr, &GenerationStats::prefill_ms},
    {"decode_ms", &JobResult::decode_ms, nullptr, &GenerationStats::decode_ms},
    {"prefill_tok_s", &JobResult::prefill_tok_s, nullptr, &GenerationStats::prefill_tok_s},
    {"decode_tok_s", &JobResult::decode_tok_s, nullptr, &GenerationStats::decode_tok_s},
    {"peak_rss_bytes", nullptr, &JobResult::peak_rss_bytes, nullptr, &GenerationStats::peak_rss_bytes},
    {"bytes_read", nullptr, &JobResult::bytes_read, nullptr, &GenerationStats::bytes_read},
    {"read_gib_s", &JobResult::read_gib_s, nullptr, &GenerationStats::read_gib_s},
    {"io_wait_ms", &JobResult::io_wait_ms, nullptr, &GenerationStats::io_wait_ms},
    {"compute_ms", &JobResult::compute_ms, nullptr, &GenerationStats::compute_ms},
    {"cache_hit_rate", &JobResult::cache_hit_rate, nullptr, &GenerationStats::cache_hit_rate},
    {"prefetch_accuracy", &JobResult::prefetch_accuracy, nullptr, &GenerationStats::prefetch_accuracy},
    {"avg_batch_size", &JobResult::avg_batch_size, nullptr, &GenerationStats::avg_batch_size},
    {"decode_share_ms", &JobResult::decode_share_ms, nullptr, &GenerationStats::decode_share_ms},
    {"prefix_tokens", nullptr, &JobResult::prefix_tokens, nullptr, &GenerationStats::prefix_tokens},
};

// "queue_wait_ms, load_ms, ...": the columns in table order, each after `prefix` ("r.").
std::string result_stat_columns(const char* prefix = "");
// The value of `stat` in `r` as the database stores it.
inline double stat_real(const ResultStat& stat, const JobResult& r) { return r.*stat.real; }
inline int64_t stat_bytes(const ResultStat& stat, const JobResult& r) { return static_cast<int64_t>(r.*stat.bytes); }
// The statistics the engine measured, copied into `r` (the rows with an engine member).
void copy_engine_stats(const GenerationStats& from, JobResult& r);

}  // namespace ns::jobs
