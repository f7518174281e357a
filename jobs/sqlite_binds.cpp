// How a job's fields map onto SQLite statement parameters and back
// (declared in jobs/sqlite_queue_impl.h).
#include <nlohmann/json.hpp>

#include <bit>

#include "jobs/sqlite_queue_impl.h"
#include "jobs/time_format.h"

namespace ns::jobs::sqlite {

std::vector<int32_t> tokens_from_json(const std::string& text, int64_t id, const std::string& path) {
  try {
    return nlohmann::json::parse(text).get<std::vector<int32_t>>();
  } catch (const nlohmann::json::exception& e) {
    throw DatabaseError(false, "database " + path + ": the checkpoint of job " + std::to_string(id) +
                                   " is not a JSON array of token ids: " + e.what() +
                                   "; delete the row from `checkpoints` and the job starts over");
  }
}

std::vector<int64_t> ids_from_json(const std::string& text, const std::string& worker, const std::string& path) {
  try {
    return nlohmann::json::parse(text).get<std::vector<int64_t>>();
  } catch (const nlohmann::json::exception& e) {
    throw DatabaseError(false, "database " + path + ": worker " + worker +
                                   " has a jobs column that is not a JSON array of job ids: " + e.what());
  }
}

Stmt& bind_fence(Stmt& st, const Lease& lease) {
  return st.bind(1, lease.job_id).bind(2, lease.worker).bind(3, int64_t{lease.attempt});
}

// Both columns of an optional time (epoch ms and ISO text): NULL for 0.
Stmt& bind_time(Stmt& st, int index, int64_t ms) {
  if (ms != 0) return st.bind(index, ms).bind(index + 1, iso8601_utc(ms));
  return st.bind_null(index).bind_null(index + 1);
}

Stmt& bind_errors(Stmt& st, int index, const std::string* error_kind, const std::string* error) {
  if (error_kind != nullptr) return st.bind(index, *error_kind).bind(index + 1, *error);
  return st.bind_null(index).bind_null(index + 1);
}

// The 14 columns from model to idempotency_key, from `first`.
Stmt& bind_spec_head(Stmt& st, int first, const JobSpec& spec) {
  const SamplingParams& sp = spec.sampling;
  return st.bind(first, spec.model)
      .bind_text_or_null(first + 1, spec.prompt)
      .bind(first + 2, int64_t{sp.max_tokens})
      .bind(first + 3, stored_real(sp.temperature))
      .bind(first + 4, int64_t{sp.top_k})
      .bind(first + 5, stored_real(sp.top_p))
      .bind(first + 6, stored_real(sp.min_p))
      .bind(first + 7, stored_real(sp.repeat_penalty))
      .bind(first + 8, int64_t{sp.repeat_last_n})
      .bind(first + 9, std::bit_cast<int64_t>(sp.seed))
      .bind(first + 10, stop_to_json(sp.stop))
      .bind(first + 11, int64_t{sp.ignore_eos ? 1 : 0})
      .bind(first + 12, int64_t{spec.priority})
      .bind_text_or_null(first + 13, spec.idempotency_key);
}

// The 5 columns messages, batch, custom_id, source_path, source_line, from `first`.
Stmt& bind_spec_input(Stmt& st, int first, const JobSpec& spec) {
  st.bind_text_or_null(first, spec.messages)
      .bind_text_or_null(first + 1, spec.batch)
      .bind_text_or_null(first + 2, spec.custom_id)
      .bind_text_or_null(first + 3, spec.source_path);
  if (spec.source_line > 0) return st.bind(first + 4, int64_t{spec.source_line});
  return st.bind_null(first + 4);
}

}  // namespace ns::jobs::sqlite
