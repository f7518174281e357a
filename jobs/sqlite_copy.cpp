// Copying a SQLite queue (nightshift migrate-queue; added with the
// PostgreSQL backend): every job with its result, attempt history and
// checkpoint, out in id order and in as it was.
#include <algorithm>

#include "jobs/job_row.h"
#include "jobs/sqlite_queue_impl.h"
#include "jobs/time_format.h"

namespace ns::jobs::sqlite {

std::vector<JobCopy> SqliteQueue::export_jobs(int64_t after_id, int32_t limit) {
  auto st = db_.cached(std::string(kSelectJob) + " WHERE j.id > ?1 ORDER BY j.id LIMIT ?2");
  st->bind(1, after_id).bind(2, int64_t{std::max<int32_t>(limit, 1)});
  std::vector<JobCopy> out;
  while (st->step()) out.push_back({read_job(StmtRow(*st), db_.path()), {}, std::nullopt});
  for (JobCopy& c : out) {
    c.history = attempts(c.job.id);
    c.checkpoint = checkpoint(c.job.id);
  }
  return out;
}

void SqliteQueue::refuse_taken_ids(std::span<const JobCopy> copies) {
  for (const JobCopy& c : copies) {
    auto taken = db_.cached("SELECT 1 FROM jobs WHERE id = ?1");
    taken->bind(1, c.job.id);
    if (taken->step()) {
      throw DatabaseError(false, "database " + db_.path() + " already has a job " + std::to_string(c.job.id) +
                                     "; copy into an empty queue to keep the ids, or append under new ids");
    }
  }
}

void SqliteQueue::mark_page(const std::string& source, bool keep_ids, int64_t last_source_id, int64_t copied,
                            int64_t skipped) {
  auto st = db_.cached(R"(
    INSERT INTO queue_migrations (source, keep_ids, started_ms, updated_ms, last_source_id, copied, skipped)
    VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6)
    ON CONFLICT (source) DO UPDATE SET updated_ms = excluded.updated_ms, finished_ms = NULL,
      last_source_id = max(last_source_id, excluded.last_source_id), copied = copied + excluded.copied,
      skipped = skipped + excluded.skipped)");
  st->bind(1, source)
      .bind(2, int64_t{keep_ids ? 1 : 0})
      .bind(3, now_epoch_ms())
      .bind(4, last_source_id)
      .bind(5, copied)
      .bind(6, skipped);
  st->run();
}

std::optional<Queue::MigrationMark> SqliteQueue::migration_mark(const std::string& source) {
  auto st = db_.cached(std::string(kSelectMigrationMark) + "WHERE source = ?1");
  st->bind(1, source);
  if (!st->step()) return std::nullopt;
  return read_migration_mark(StmtRow(*st));
}

void SqliteQueue::finish_migration(const std::string& source, bool keep_ids) {
  WriteTransaction tx(db_);
  auto st = db_.cached(R"(
    INSERT INTO queue_migrations (source, keep_ids, started_ms, updated_ms, finished_ms) VALUES (?1, ?2, ?3, ?3, ?3)
    ON CONFLICT (source) DO UPDATE SET updated_ms = excluded.updated_ms, finished_ms = excluded.finished_ms)");
  st->bind(1, source).bind(2, int64_t{keep_ids ? 1 : 0}).bind(3, now_epoch_ms());
  st->run();
  tx.commit();
}

// Inside a write transaction: one exported job, as it was (AUTOINCREMENT
// keeps later ids above an id inserted explicitly).
SubmitOutcome SqliteQueue::import_one(const JobCopy& c, bool keep_ids) {
  const Job& j = c.job;
  if (std::optional<int64_t> id = id_for_key(j.spec.idempotency_key)) return {*id, false};
  auto ins = db_.cached(R"(
    INSERT INTO jobs (id, model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                      repeat_last_n, seed, stop, ignore_eos, priority, idempotency_key, state,
                      created_ms, created_at, started_ms, started_at, finished_ms, finished_at, worker,
                      attempts, cancel_requested, error_kind, error, max_attempts, attempt,
                      lease_expires_ms, lease_expires_at, not_before_ms, not_before_at,
                      messages, batch, custom_id, source_path, source_line,
                      progress_prompt_tokens, progress_prefilled, progress_generated, progress_tok_s,
                      progress_ms, progress_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20,
            ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35, ?36, ?37, ?38,
            ?39, ?40, ?41, ?42, ?43, ?44))");
  if (keep_ids) {
    ins->bind(1, j.id);
  } else {
    ins->bind_null(1);
  }
  bind_spec_head(*ins, 2, j.spec).bind(16, state_name(j.state));
  // created_ms is always set: both columns, as the original row had them.
  ins->bind(17, j.created_ms).bind(18, iso8601_utc(j.created_ms));
  bind_time(*ins, 19, j.started_ms);
  bind_time(*ins, 21, j.finished_ms);
  ins->bind_text_or_null(23, j.worker)
      .bind(24, int64_t{j.attempts})
      .bind(25, int64_t{j.cancel_requested ? 1 : 0})
      .bind_text_or_null(26, j.error_kind)
      .bind_text_or_null(27, j.error)
      .bind(28, int64_t{j.spec.max_attempts})
      .bind(29, int64_t{j.attempt});
  bind_time(*ins, 30, j.lease_expires_ms);
  bind_time(*ins, 32, j.spec.not_before_ms);
  bind_spec_input(*ins, 34, j.spec);
  if (j.progress.updated_ms != 0) {
    ins->bind(39, int64_t{j.progress.prompt_tokens})
        .bind(40, int64_t{j.progress.prefilled})
        .bind(41, int64_t{j.progress.generated})
        .bind(42, j.progress.tok_s);
  } else {
    ins->bind_null(39).bind_null(40).bind_null(41).bind_null(42);
  }
  bind_time(*ins, 43, j.progress.updated_ms);
  ins->run();
  const int64_t id = db_.last_insert_rowid();
  set_grammar(id, j.spec.sampling.grammar);
  write_output_options(id, j.spec.sampling);
  if (j.result) write_result(id, *j.result);
  for (const AttemptRecord& a : c.history) {
    auto put = db_.cached(R"(
      INSERT INTO attempts (job_id, attempt, worker, started_ms, started_at, resumed_tokens, ended_ms, ended_at,
                            outcome, error_kind, error)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11))");
    put->bind(1, id)
        .bind(2, int64_t{a.attempt})
        .bind(3, a.worker)
        .bind(4, a.started_ms)
        .bind(5, iso8601_utc(a.started_ms))
        .bind(6, int64_t{a.resumed_tokens});
    bind_time(*put, 7, a.ended_ms);
    put->bind_text_or_null(9, a.outcome).bind_text_or_null(10, a.error_kind).bind_text_or_null(11, a.error);
    put->run();
  }
  if (c.checkpoint) {
    auto put = db_.cached(R"(
      INSERT INTO checkpoints (job_id, attempt, token_count, tokens, saved_ms, saved_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6))");
    put->bind(1, id)
        .bind(2, int64_t{c.checkpoint->attempt})
        .bind(3, static_cast<int64_t>(c.checkpoint->tokens.size()))
        .bind(4, ints_to_json(std::span<const int32_t>(c.checkpoint->tokens)))
        .bind(5, c.checkpoint->saved_ms)
        .bind(6, iso8601_utc(c.checkpoint->saved_ms));
    put->run();
    write_checkpoint_choices(id, *c.checkpoint);
  }
  return {id, true};
}

}  // namespace ns::jobs::sqlite
