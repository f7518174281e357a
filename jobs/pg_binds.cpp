// How a job's fields map onto PostgreSQL query parameters and back
// (declared in jobs/pg_queue_impl.h).
#include <bit>

#include "jobs/pg_queue_impl.h"

namespace ns::jobs::pg {

Params fence(const Lease& lease) { return Params().add(lease.job_id).add(lease.worker).add(lease.attempt); }

Params& add_errors(Params& p, const std::string* error_kind, const std::string* error) {
  if (error_kind != nullptr) return p.add(*error_kind).add(*error);
  return p.add_null().add_null();
}

// The 14 columns from model to idempotency_key.
Params& add_spec_head(Params& p, const JobSpec& spec) {
  const SamplingParams& sp = spec.sampling;
  return p.add(spec.model)
      .add_text_or_null(spec.prompt)
      .add(sp.max_tokens)
      .add(stored_real(sp.temperature))
      .add(sp.top_k)
      .add(stored_real(sp.top_p))
      .add(stored_real(sp.min_p))
      .add(stored_real(sp.repeat_penalty))
      .add(sp.repeat_last_n)
      .add(std::bit_cast<int64_t>(sp.seed))
      .add(stop_to_json(sp.stop))
      .add(sp.ignore_eos)
      .add(spec.priority)
      .add_text_or_null(spec.idempotency_key);
}

// The 5 columns messages, batch, custom_id, source_path, source_line.
Params& add_spec_input(Params& p, const JobSpec& spec) {
  return p.add_text_or_null(spec.messages)
      .add_text_or_null(spec.batch)
      .add_text_or_null(spec.custom_id)
      .add_text_or_null(spec.source_path)
      .add_or_null(int64_t{spec.source_line});
}

AttemptRecord read_attempt_row(const Result& r, int i) { return read_attempt(ResultRow(r, i), 1); }

// Columns attempt, tokens, saved_ms, choices, logprobs from `first`.
Checkpoint read_checkpoint(const Result& r, int row, int first, int64_t id, const std::string& db) {
  Checkpoint c;
  c.attempt = static_cast<int32_t>(r.int64(row, first));
  for (int64_t t : r.int_array(row, first + 1)) c.tokens.push_back(static_cast<int32_t>(t));
  c.saved_ms = r.int64(row, first + 2);
  c.more_tokens = token_lists_from_json(r.text(row, first + 3), id, db);
  c.logprobs = r.text(row, first + 4);
  return c;
}

}  // namespace ns::jobs::pg
