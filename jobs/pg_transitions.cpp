// The PostgreSQL SQL of the job state machine's primitives (contract in
// jobs/queue_transitions.h; the state machine itself is backend-neutral).
// Rows a decision reads are locked (FOR UPDATE; claims and recovery skip
// rows others hold), and every time is the server's (nightshift_now_ms()).
#include <iterator>

#include "jobs/pg_queue_impl.h"
#include "jobs/result_stats.h"

namespace ns::jobs::pg {

SubmitOutcome PgQueue::insert(const JobSpec& spec) {
  Params p;
  add_spec_head(p, spec).add(spec.max_attempts).add_or_null(spec.not_before_ms);
  add_spec_input(p, spec);
  // A second submit with the same key (even concurrently, from another
  // machine) inserts nothing and returns the first job's id.
  Result r = db_.exec(R"(
    INSERT INTO jobs (model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                      repeat_last_n, seed, stop, ignore_eos, priority, idempotency_key,
                      created_ms, max_attempts, not_before_ms, messages, batch, custom_id, source_path, source_line)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12, $13, $14,
            nightshift_now_ms(), $15, $16, $17::json, $18, $19, $20, $21)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id)",
                      p);
  if (r.rows() == 1) {
    set_grammar(r.int64(0, 0), spec.sampling.grammar);
    write_output_options(r.int64(0, 0), spec.sampling);
    return {r.int64(0, 0), true};
  }
  if (std::optional<int64_t> id = id_for_key(spec.idempotency_key)) return {*id, false};
  throw DatabaseError(true, "database " + db_.name() + ": job with idempotency key '" + spec.idempotency_key +
                                "' was neither inserted nor found (deleted meanwhile?); submit it again");
}

void PgQueue::set_grammar(int64_t id, const std::string& grammar) {
  if (grammar.empty()) return;
  db_.exec("UPDATE jobs SET grammar = $2 WHERE id = $1", Params().add(id).add(grammar));
}

// Idle daemons poll: one cheap read outside a transaction (every model).
bool PgQueue::anything_claimable(const std::string&) {
  return db_.exec(
                "SELECT 1 FROM jobs WHERE state = 'queued' AND "
                "(not_before_ms IS NULL OR not_before_ms <= nightshift_now_ms()) LIMIT 1")
             .rows() > 0;
}

// The head of the queue as this claimer can take it (rows other claimers
// hold are skipped: they are being taken, so they are no longer ahead;
// jobs for models it cannot serve are left to the daemons that can).
std::vector<QueueHead> PgQueue::claimable_head(int limit, const std::string& servable_json) {
  Result head = db_.exec(R"(
    SELECT id, model, run_alone FROM jobs
    WHERE state = 'queued' AND (not_before_ms IS NULL OR not_before_ms <= nightshift_now_ms())
      AND ($2::jsonb IS NULL OR model IN (SELECT jsonb_array_elements_text($2::jsonb)))
    ORDER BY priority DESC, id LIMIT $1
    FOR UPDATE SKIP LOCKED)",
                         Params().add(int64_t{limit}).add_text_or_null(servable_json));
  std::vector<QueueHead> out;
  for (int i = 0; i < head.rows(); ++i) out.push_back({head.int64(i, 0), head.text(i, 1), head.boolean(i, 2)});
  return out;
}

std::vector<Job> PgQueue::claim_ids(const std::vector<int64_t>& ids, const std::string& worker, int64_t lease_ms) {
  Params p;
  p.add_array(std::span<const int64_t>(ids));
  db_.exec(R"(
    UPDATE jobs SET state = 'running', worker = $2, attempts = attempts + 1, attempt = attempt + 1,
                    started_ms = nightshift_now_ms(), lease_expires_ms = nightshift_now_ms() + $3,
                    not_before_ms = NULL, error_kind = NULL, error = NULL,
                    progress_prompt_tokens = NULL, progress_prefilled = NULL, progress_generated = NULL,
                    progress_tok_s = NULL, progress_ms = NULL, progress_eta_s = NULL
    WHERE id = ANY($1::bigint[]))",
           Params(p).add(worker).add(lease_ms));
  db_.exec(R"(
    INSERT INTO attempts (job_id, attempt, worker, started_ms, resumed_tokens)
    SELECT j.id, j.attempt, j.worker, j.started_ms, coalesce(c.token_count, 0)
    FROM jobs AS j LEFT JOIN checkpoints AS c ON c.job_id = j.id
    WHERE j.id = ANY($1::bigint[]))",
           p);
  return select_jobs(" WHERE j.id = ANY($1::bigint[]) ORDER BY j.priority DESC, j.id", p);
}

std::optional<Orphan> PgQueue::running_under(const Lease& lease) {
  Result r = db_.exec(std::string("SELECT attempts, max_attempts, cancel_requested FROM jobs") + kFence + " FOR UPDATE",
                      fence(lease));
  if (r.rows() == 0) return std::nullopt;
  Orphan o;
  o.id = lease.job_id;
  o.attempt = lease.attempt;
  o.attempts = static_cast<int32_t>(r.int64(0, 0));
  o.max_attempts = static_cast<int32_t>(r.int64(0, 1));
  o.cancel_requested = r.boolean(0, 2);
  o.worker = lease.worker;
  return o;
}

bool PgQueue::extend_lease(const Lease& lease, int64_t lease_ms, const JobProgress* progress) {
  Params p = fence(lease).add(lease_ms);
  std::string sql = "UPDATE jobs SET lease_expires_ms = nightshift_now_ms() + $4";
  if (progress) {
    sql += R"(, progress_prompt_tokens = $5, progress_prefilled = $6, progress_generated = $7,
                progress_tok_s = $8, progress_ms = nightshift_now_ms(), progress_eta_s = $9)";
    p.add(progress->prompt_tokens).add(progress->prefilled).add(progress->generated).add(progress->tok_s);
    if (progress->eta_s >= 0)
      p.add(progress->eta_s);
    else
      p.add_null();
  }
  return db_.exec(sql + kFence, p).affected() == 1;
}

void PgQueue::put_checkpoint(const Lease& lease, const Checkpoint& cp) {
  const std::span<const int32_t> tokens = cp.tokens;
  db_.exec(R"(
    INSERT INTO checkpoints (job_id, attempt, token_count, tokens, saved_ms)
    VALUES ($1, $2, $3, $4::integer[], nightshift_now_ms())
    ON CONFLICT (job_id) DO UPDATE SET attempt = EXCLUDED.attempt, token_count = EXCLUDED.token_count,
                                       tokens = EXCLUDED.tokens, saved_ms = EXCLUDED.saved_ms)",
           Params().add(lease.job_id).add(lease.attempt).add(static_cast<int64_t>(tokens.size())).add_array(tokens));
  write_checkpoint_choices(lease.job_id, cp);
}

void PgQueue::write_output_options(int64_t id, const SamplingParams& sp) {
  if (sp.n == 1 && !sp.logprobs) return;  // the columns' defaults
  Params p;
  p.add(id).add(sp.n);
  if (sp.logprobs)
    p.add(sp.top_logprobs);
  else
    p.add_null();
  db_.exec("UPDATE jobs SET n = $2, top_logprobs = $3 WHERE id = $1", p);
}

// Always written: ON CONFLICT DO UPDATE keeps the columns it does not name.
void PgQueue::write_result_choices(int64_t id, const JobResult& r) {
  db_.exec("UPDATE results SET choices = $2::jsonb, logprobs = $3 WHERE job_id = $1",
           Params().add(id).add_text_or_null(choices_to_json(r.more_choices)).add_text_or_null(r.logprobs));
}

void PgQueue::write_checkpoint_choices(int64_t id, const Checkpoint& cp) {
  db_.exec("UPDATE checkpoints SET choices = $2::jsonb, logprobs = $3 WHERE job_id = $1",
           Params().add(id).add_text_or_null(token_lists_to_json(cp.more_tokens)).add_text_or_null(cp.logprobs));
}

bool PgQueue::finish_fenced(const Lease& lease, const char* state, const std::string* error_kind,
                            const std::string* error) {
  Params p = fence(lease).add(state);
  return db_.exec(std::string(R"(
    UPDATE jobs SET state = $4, finished_ms = nightshift_now_ms(), error_kind = $5, error = $6,
                    lease_expires_ms = NULL)") +
                      kFence,
                  add_errors(p, error_kind, error))
             .affected() == 1;
}

void PgQueue::requeue_fenced(const Lease& lease, int64_t delay_ms, const std::string& error_kind,
                             const std::string& error) {
  db_.exec(std::string(R"(
    UPDATE jobs SET state = 'queued', worker = NULL, started_ms = NULL, lease_expires_ms = NULL,
                    not_before_ms = nightshift_now_ms() + $4, error_kind = $5, error = $6)") +
               kFence,
           fence(lease).add(delay_ms).add(error_kind).add(error));
}

void PgQueue::release_fenced(const Lease& lease, bool run_alone, const std::string* held) {
  Params p = fence(lease).add(run_alone);
  if (held) {
    p.add(*held);
  } else {
    p.add_null();
  }
  db_.exec(std::string(R"(
    UPDATE jobs SET state = 'queued', worker = NULL, started_ms = NULL, lease_expires_ms = NULL,
                    attempts = greatest(attempts - 1, 0), run_alone = run_alone OR $4,
                    error_kind = CASE WHEN $5::text IS NOT NULL THEN $6
                                      WHEN error_kind = $6 THEN NULL ELSE error_kind END,
                    error = CASE WHEN $5::text IS NOT NULL THEN $5 WHEN error_kind = $6 THEN NULL ELSE error END)") +
               kFence,
           p.add(std::string(kHeldErrorKind)));
}

void PgQueue::end_attempt(const Lease& lease, const AttemptEnd& end) {
  Params p = Params().add(lease.job_id).add(lease.attempt).add(end.outcome);
  db_.exec(R"(
    UPDATE attempts SET ended_ms = nightshift_now_ms(), outcome = $3, error_kind = $4, error = $5
    WHERE job_id = $1 AND attempt = $2)",
           add_errors(p, end.error_kind, end.error));
}

void PgQueue::write_result(int64_t id, const JobResult& r) {
  // The statistics' columns and parameters come from jobs/result_stats.h.
  static const std::string sql = [] {
    std::string values = "$1, $2, $3, $4, $5, $6", updates;
    for (size_t i = 0; i < std::size(kResultStats); ++i) {
      values += ", $" + std::to_string(7 + i);
      updates += std::string(", ") + kResultStats[i].name + " = EXCLUDED." + kResultStats[i].name;
    }
    return "INSERT INTO results (job_id, text, finish_reason, prompt_tokens, completion_tokens, "
           "prompt_tokens_dropped, " +
           result_stat_columns() + ") VALUES (" + values +
           ") ON CONFLICT (job_id) DO UPDATE SET text = EXCLUDED.text, finish_reason = EXCLUDED.finish_reason, "
           "prompt_tokens = EXCLUDED.prompt_tokens, completion_tokens = EXCLUDED.completion_tokens, "
           "prompt_tokens_dropped = EXCLUDED.prompt_tokens_dropped" +
           updates;
  }();
  Params p = Params().add(id).add(r.text).add(r.finish_reason).add(r.prompt_tokens).add(r.completion_tokens);
  p.add(r.prompt_tokens_dropped);
  for (const ResultStat& st : kResultStats) {
    if (st.real != nullptr)
      p.add(stat_real(st, r));
    else
      p.add(stat_bytes(st, r));
  }
  db_.exec(sql, p);
  write_result_choices(id, r);
}

void PgQueue::drop_checkpoint(int64_t id) { db_.exec("DELETE FROM checkpoints WHERE job_id = $1", Params().add(id)); }

bool PgQueue::any_orphan(const OrphanScope& scope) {
  if (scope.expired()) {
    return db_.exec("SELECT 1 FROM jobs WHERE state = 'running' AND " + untrusted_lease_sql("nightshift_now_ms()") +
                    " LIMIT 1")
               .rows() > 0;
  }
  return db_.exec("SELECT 1 FROM jobs WHERE state = 'running' AND worker = $1 LIMIT 1", Params().add(scope.worker))
             .rows() > 0;
}

// SKIP LOCKED: another daemon recovering the same job at the same moment
// keeps it; this one moves on.
std::vector<Orphan> PgQueue::orphans(const OrphanScope& scope) {
  Params p;
  if (!scope.expired()) p.add(scope.worker);
  Result r = db_.exec(std::string("SELECT id, attempt, attempts, max_attempts, cancel_requested, worker, "
                                  "coalesce(lease_expires_ms, 0), run_alone, ") +
                          kSharedCrash + " FROM jobs WHERE state = 'running' AND " +
                          (scope.expired() ? untrusted_lease_sql("nightshift_now_ms()") : std::string("worker = $1")) +
                          " ORDER BY id FOR UPDATE SKIP LOCKED",
                      p);
  std::vector<Orphan> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_orphan(ResultRow(r, i)));
  return out;
}

std::optional<std::string> PgQueue::locked_state_of(int64_t id) {
  Result r = db_.exec("SELECT state FROM jobs WHERE id = $1 FOR UPDATE", Params().add(id));
  if (r.rows() == 0) return std::nullopt;
  return r.text(0, 0);
}

void PgQueue::finish_unfenced(int64_t id, const char* state) {
  db_.exec(R"(
    UPDATE jobs SET state = $2, finished_ms = nightshift_now_ms(), error_kind = NULL, error = NULL,
                    lease_expires_ms = NULL
    WHERE id = $1)",
           Params().add(id).add(state));
}

void PgQueue::request_cancel(int64_t id) {
  db_.exec("UPDATE jobs SET cancel_requested = true WHERE id = $1", Params().add(id));
}

void PgQueue::reset_to_queued(int64_t id, const std::string& model) {
  db_.exec(R"(
    UPDATE jobs SET state = 'queued', attempts = 0, worker = NULL, started_ms = NULL, finished_ms = NULL,
                    error_kind = NULL, error = NULL, cancel_requested = false, not_before_ms = NULL,
                    lease_expires_ms = NULL, run_alone = false, model = coalesce($2, model)
    WHERE id = $1)",
           Params().add(id).add_text_or_null(model));
  db_.exec("DELETE FROM results WHERE job_id = $1", Params().add(id));
}

QueueCounts PgQueue::counts_of(const std::string& batch) {
  Result r = db_.exec(R"(
    SELECT state, count(*),
           count(*) FILTER (WHERE not_before_ms > nightshift_now_ms() AND error_kind IS NOT NULL),
           count(*) FILTER (WHERE error_kind = $2), coalesce(max(error) FILTER (WHERE error_kind = $2), '')
    FROM jobs WHERE $1::text IS NULL OR batch = $1 GROUP BY state)",
                      Params().add_text_or_null(batch).add(std::string(kHeldErrorKind)));
  QueueCounts c;
  for (int i = 0; i < r.rows(); ++i) {
    const JobState state = state_from_column(r.text(i, 0), 0, db_.name());
    add_count(c, state, r.int64(i, 1));
    if (state == JobState::queued) {
      c.retry_waiting = r.int64(i, 2);
      c.held = r.int64(i, 3);
    }
  }
  if (c.held > 0) {  // each held model's reason (held_reason_text)
    const Result h = db_.exec(
        "SELECT model, count(*), max(error) FROM jobs WHERE state = 'queued' AND error_kind = $2 "
        "AND ($1::text IS NULL OR batch = $1) GROUP BY model ORDER BY model",
        Params().add_text_or_null(batch).add(std::string(kHeldErrorKind)));
    std::vector<HeldModel> models;
    for (int i = 0; i < h.rows(); ++i) models.push_back({h.text(i, 0), h.int64(i, 1), h.text(i, 2)});
    c.held_reason = held_reason_text(models);
  }
  return c;
}

std::optional<int64_t> PgQueue::id_for_key(const std::string& key) {
  Result r = db_.exec("SELECT id FROM jobs WHERE idempotency_key = $1", Params().add(key));
  if (r.rows() != 1) return std::nullopt;
  return r.int64(0, 0);
}

}  // namespace ns::jobs::pg
