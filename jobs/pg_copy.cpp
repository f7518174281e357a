// Copying a PostgreSQL queue (nightshift migrate-queue): every job with its
// result, attempt history and checkpoint, out in id order and in as it was.
#include <algorithm>
#include <map>

#include "jobs/job_row.h"
#include "jobs/pg_queue_impl.h"

namespace ns::jobs::pg {

std::vector<JobCopy> PgQueue::export_jobs(int64_t after_id, int32_t limit) {
  std::vector<JobCopy> out;
  std::map<int64_t, size_t> index;
  std::vector<int64_t> ids;
  for (Job& job : select_jobs(" WHERE j.id > $1 ORDER BY j.id LIMIT $2",
                              Params().add(after_id).add(int64_t{std::max(limit, 1)}))) {
    index[job.id] = out.size();
    ids.push_back(job.id);
    out.push_back({std::move(job), {}, std::nullopt});
  }
  if (ids.empty()) return out;
  Params p;
  p.add_array(std::span<const int64_t>(ids));
  Result a = db_.exec(R"(
    SELECT job_id, attempt, worker, started_ms, ended_ms, resumed_tokens, outcome, error_kind, error
    FROM attempts WHERE job_id = ANY($1::bigint[]) ORDER BY job_id, attempt)",
                      p);
  for (int i = 0; i < a.rows(); ++i) out[index.at(a.int64(i, 0))].history.push_back(read_attempt_row(a, i));
  Result c = db_.exec(
      "SELECT job_id, attempt, tokens, saved_ms, choices, logprobs FROM checkpoints WHERE job_id = ANY($1::bigint[])",
      p);
  for (int i = 0; i < c.rows(); ++i)
    out[index.at(c.int64(i, 0))].checkpoint = read_checkpoint(c, i, 1, c.int64(i, 0), db_.name());
  return out;
}

void PgQueue::refuse_taken_ids(std::span<const JobCopy> copies) {
  std::vector<int64_t> ids;
  for (const JobCopy& c : copies) ids.push_back(c.job.id);
  Params p;
  Result taken =
      db_.exec("SELECT min(id) FROM jobs WHERE id = ANY($1::bigint[])", p.add_array(std::span<const int64_t>(ids)));
  if (!taken.is_null(0, 0)) {
    throw DatabaseError(false, "database " + db_.name() + " already has a job " + taken.text(0, 0) +
                                   "; copy into an empty queue to keep the ids, or append under new ids");
  }
}

// Later submits get ids above every copied one.
void PgQueue::after_kept_ids() {
  db_.exec("SELECT setval(pg_get_serial_sequence('jobs', 'id'), greatest((SELECT max(id) FROM jobs), 1))");
}

// The clock is the server's, as for every other time this backend writes.
void PgQueue::mark_page(const std::string& source, bool keep_ids, int64_t last_source_id, int64_t copied,
                        int64_t skipped) {
  db_.exec(R"(
    INSERT INTO queue_migrations AS m (source, keep_ids, started_ms, updated_ms, last_source_id, copied, skipped)
    VALUES ($1, $2, nightshift_now_ms(), nightshift_now_ms(), $3, $4, $5)
    ON CONFLICT (source) DO UPDATE SET updated_ms = EXCLUDED.updated_ms, finished_ms = NULL,
      last_source_id = greatest(m.last_source_id, EXCLUDED.last_source_id), copied = m.copied + EXCLUDED.copied,
      skipped = m.skipped + EXCLUDED.skipped)",
           Params().add(source).add(keep_ids).add(last_source_id).add(copied).add(skipped));
}

std::optional<Queue::MigrationMark> PgQueue::migration_mark(const std::string& source) {
  Result r = db_.exec(std::string(kSelectMigrationMark) + "WHERE source = $1", Params().add(source));
  if (r.rows() == 0) return std::nullopt;
  return read_migration_mark(ResultRow(r, 0));
}

void PgQueue::finish_migration(const std::string& source, bool keep_ids) {
  db_.exec(R"(
    INSERT INTO queue_migrations AS m (source, keep_ids, started_ms, updated_ms, finished_ms)
    VALUES ($1, $2, nightshift_now_ms(), nightshift_now_ms(), nightshift_now_ms())
    ON CONFLICT (source) DO UPDATE SET updated_ms = EXCLUDED.updated_ms, finished_ms = EXCLUDED.finished_ms)",
           Params().add(source).add(keep_ids));
}

// Inside a transaction: one exported job, as it was.
SubmitOutcome PgQueue::import_one(const JobCopy& c, bool keep_ids) {
  const Job& j = c.job;
  if (!j.spec.idempotency_key.empty()) {
    if (std::optional<int64_t> id = id_for_key(j.spec.idempotency_key)) return {*id, false};
  }
  Params p;
  p.add(j.id);
  add_spec_head(p, j.spec)
      .add(state_name(j.state))
      .add(j.created_ms)
      .add_or_null(j.started_ms)
      .add_or_null(j.finished_ms)
      .add_text_or_null(j.worker)
      .add(j.attempts)
      .add(j.cancel_requested)
      .add_text_or_null(j.error_kind)
      .add_text_or_null(j.error)
      .add(j.spec.max_attempts)
      .add(j.attempt)
      .add_or_null(j.lease_expires_ms)
      .add_or_null(j.spec.not_before_ms);
  add_spec_input(p, j.spec);
  if (j.progress.updated_ms != 0) {
    p.add(j.progress.prompt_tokens).add(j.progress.prefilled).add(j.progress.generated).add(j.progress.tok_s);
    p.add(j.progress.updated_ms);
  } else {
    p.add_null().add_null().add_null().add_null().add_null();
  }
  // OVERRIDING USER VALUE: the id given ($1) is ignored and a new one drawn.
  Result r = db_.exec(std::string(R"(
    INSERT INTO jobs (id, model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                      repeat_last_n, seed, stop, ignore_eos, priority, idempotency_key, state, created_ms,
                      started_ms, finished_ms, worker, attempts, cancel_requested, error_kind, error,
                      max_attempts, attempt, lease_expires_ms, not_before_ms, messages, batch, custom_id,
                      source_path, source_line, progress_prompt_tokens, progress_prefilled,
                      progress_generated, progress_tok_s, progress_ms) )") +
                          (keep_ids ? "" : "OVERRIDING USER VALUE") + R"(
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13, $14, $15, $16, $17, $18, $19, $20,
            $21, $22, $23, $24, $25, $26, $27, $28, $29::json, $30, $31, $32, $33, $34, $35, $36, $37, $38)
    RETURNING id)",
                      p);
  const int64_t id = r.int64(0, 0);
  set_grammar(id, j.spec.sampling.grammar);
  write_output_options(id, j.spec.sampling);
  if (j.result) write_result(id, *j.result);
  for (const AttemptRecord& a : c.history) {
    db_.exec(R"(
      INSERT INTO attempts (job_id, attempt, worker, started_ms, resumed_tokens, ended_ms, outcome, error_kind, error)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9))",
             Params()
                 .add(id)
                 .add(a.attempt)
                 .add(a.worker)
                 .add(a.started_ms)
                 .add(a.resumed_tokens)
                 .add_or_null(a.ended_ms)
                 .add_text_or_null(a.outcome)
                 .add_text_or_null(a.error_kind)
                 .add_text_or_null(a.error));
  }
  if (c.checkpoint) {
    db_.exec(R"(
      INSERT INTO checkpoints (job_id, attempt, token_count, tokens, saved_ms)
      VALUES ($1, $2, $3, $4::integer[], $5))",
             Params()
                 .add(id)
                 .add(c.checkpoint->attempt)
                 .add(static_cast<int64_t>(c.checkpoint->tokens.size()))
                 .add_array(std::span<const int32_t>(c.checkpoint->tokens))
                 .add(c.checkpoint->saved_ms));
    write_checkpoint_choices(id, *c.checkpoint);
  }
  return {id, true};
}

}  // namespace ns::jobs::pg
