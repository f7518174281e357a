// The SQLite SQL of the job state machine's primitives (contract in
// jobs/queue_transitions.h; the state machine itself is backend-neutral).
// Every primitive runs inside the BEGIN IMMEDIATE transaction of
// begin_write(), which holds the database's write lock, so a read that
// decides a write sees what the write changes.
#include <algorithm>
#include <iterator>

#include "jobs/result_stats.h"
#include "jobs/sqlite_queue_impl.h"
#include "jobs/time_format.h"
#include "jobs/valid_utf8.h"

namespace ns::jobs::sqlite {
namespace {

// The choices and logprobs columns of the results or checkpoints row of job
// `id`, written after the row: nothing when both are "" (INSERT OR REPLACE
// left them NULL).
void update_choices(Db& db, const char* table, int64_t id, const std::string& choices, const std::string& logprobs) {
  if (choices.empty() && logprobs.empty()) return;
  db.cached(std::string("UPDATE ") + table + " SET choices = ?2, logprobs = ?3 WHERE job_id = ?1")
      ->bind(1, id)
      .bind_text_or_null(2, choices)
      .bind_text_or_null(3, logprobs)
      .run();
}

}  // namespace

SubmitOutcome SqliteQueue::insert(const JobSpec& spec) {
  if (std::optional<int64_t> id = id_for_key(spec.idempotency_key)) return {*id, false};
  const int64_t now = now_epoch_ms();
  auto ins = db_.cached(R"(
    INSERT INTO jobs (model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                      repeat_last_n, seed, stop, ignore_eos, priority, idempotency_key,
                      created_ms, created_at, max_attempts, not_before_ms, not_before_at,
                      messages, batch, custom_id, source_path, source_line)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
            ?20, ?21, ?22, ?23, ?24))");
  bind_spec_head(*ins, 1, spec).bind(15, now).bind(16, iso8601_utc(now)).bind(17, int64_t{spec.max_attempts});
  if (spec.not_before_ms > 0) {
    bind_time(*ins, 18, spec.not_before_ms);
  } else {
    ins->bind_null(18).bind_null(19);
  }
  bind_spec_input(*ins, 20, spec).run();
  const int64_t id = db_.last_insert_rowid();
  set_grammar(id, spec.sampling.grammar);
  write_output_options(id, spec.sampling);
  return {id, true};
}

void SqliteQueue::set_grammar(int64_t id, const std::string& grammar) {
  if (grammar.empty()) return;
  db_.cached("UPDATE jobs SET grammar = ?2 WHERE id = ?1")->bind(1, id).bind(2, grammar).run();
}

void SqliteQueue::write_output_options(int64_t id, const SamplingParams& sp) {
  if (sp.n == 1 && !sp.logprobs) return;  // the columns' defaults
  auto up = db_.cached("UPDATE jobs SET n = ?2, top_logprobs = ?3 WHERE id = ?1");
  up->bind(1, id).bind(2, int64_t{sp.n});
  if (sp.logprobs)
    up->bind(3, int64_t{sp.top_logprobs});
  else
    up->bind_null(3);
  up->run();
}

void SqliteQueue::write_result_choices(int64_t id, const JobResult& r) {
  update_choices(db_, "results", id, choices_to_json(r.more_choices), r.logprobs);
}

void SqliteQueue::write_checkpoint_choices(int64_t id, const Checkpoint& cp) {
  update_choices(db_, "checkpoints", id, token_lists_to_json(cp.more_tokens), cp.logprobs);
}

bool SqliteQueue::anything_claimable(const std::string& servable_json) {
  const int64_t now = now_epoch_ms();
  return db_.cached(kHead)
      ->bind(1, now)
      .bind(2, int64_t{1})
      .bind_text_or_null(3, servable_json)
      .bind(4, backoff_horizon(now))
      .step();
}

std::vector<QueueHead> SqliteQueue::claimable_head(int limit, const std::string& servable_json) {
  claim_now_ = now_epoch_ms();  // one clock reading for the head and the claims
  auto head = db_.cached(kHead);
  head->bind(1, claim_now_).bind(2, int64_t{limit}).bind_text_or_null(3, servable_json);
  head->bind(4, backoff_horizon(claim_now_));
  std::vector<QueueHead> out;
  while (head->step()) out.push_back({head->int64(0), head->text(1), head->int64(2) != 0});
  return out;
}

std::vector<Job> SqliteQueue::claim_ids(const std::vector<int64_t>& ids, const std::string& worker, int64_t lease_ms) {
  const int64_t expires = claim_now_ + lease_ms;
  std::vector<Job> out;
  for (int64_t id : ids) {
    auto up = db_.cached(R"(
      UPDATE jobs SET state = 'running', worker = ?2, attempts = attempts + 1, attempt = attempt + 1,
                      started_ms = ?3, started_at = ?4, lease_expires_ms = ?5, lease_expires_at = ?6,
                      not_before_ms = NULL, not_before_at = NULL, error_kind = NULL, error = NULL,
                      progress_prompt_tokens = NULL, progress_prefilled = NULL, progress_generated = NULL,
                      progress_tok_s = NULL, progress_ms = NULL, progress_at = NULL, progress_eta_s = NULL
      WHERE id = ?1)");
    up->bind(1, id).bind(2, worker);
    bind_time(*up, 3, claim_now_);
    bind_time(*up, 5, expires).run();
    db_.cached(R"(
      INSERT INTO attempts (job_id, attempt, worker, started_ms, started_at, resumed_tokens)
      SELECT id, attempt, worker, started_ms, started_at,
             ifnull((SELECT token_count FROM checkpoints WHERE job_id = ?1), 0)
      FROM jobs WHERE id = ?1)")
        ->bind(1, id)
        .run();
    out.push_back(*get(id));
  }
  return out;
}

std::optional<Orphan> SqliteQueue::running_under(const Lease& lease) {
  auto st = db_.cached(std::string("SELECT attempts, max_attempts, cancel_requested FROM jobs") + kFence);
  bind_fence(*st, lease);
  if (!st->step()) return std::nullopt;
  Orphan o;
  o.id = lease.job_id;
  o.attempt = lease.attempt;
  o.attempts = static_cast<int32_t>(st->int64(0));
  o.max_attempts = static_cast<int32_t>(st->int64(1));
  o.cancel_requested = st->int64(2) != 0;
  o.worker = lease.worker;
  return o;
}

bool SqliteQueue::extend_lease(const Lease& lease, int64_t lease_ms, const JobProgress* progress) {
  auto up = db_.cached(std::string("UPDATE jobs SET lease_expires_ms = ?4, lease_expires_at = ?5") + kFence);
  bind_time(bind_fence(*up, lease), 4, now_epoch_ms() + lease_ms).run();
  if (db_.changes() != 1) return false;
  if (progress) {
    auto put = db_.cached(R"(
      UPDATE jobs SET progress_prompt_tokens = ?2, progress_prefilled = ?3, progress_generated = ?4,
                      progress_tok_s = ?5, progress_ms = ?6, progress_at = ?7, progress_eta_s = ?8
      WHERE id = ?1)");
    put->bind(1, lease.job_id)
        .bind(2, int64_t{progress->prompt_tokens})
        .bind(3, int64_t{progress->prefilled})
        .bind(4, int64_t{progress->generated})
        .bind(5, progress->tok_s);
    if (progress->eta_s >= 0)
      put->bind(8, progress->eta_s);
    else
      put->bind_null(8);
    bind_time(*put, 6, now_epoch_ms()).run();
  }
  return true;
}

void SqliteQueue::put_checkpoint(const Lease& lease, const Checkpoint& cp) {
  const std::span<const int32_t> tokens = cp.tokens;
  auto put = db_.cached(R"(
    INSERT OR REPLACE INTO checkpoints (job_id, attempt, token_count, tokens, saved_ms, saved_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6))");
  put->bind(1, lease.job_id)
      .bind(2, int64_t{lease.attempt})
      .bind(3, static_cast<int64_t>(tokens.size()))
      .bind(4, ints_to_json(tokens));
  bind_time(*put, 5, now_epoch_ms()).run();
  write_checkpoint_choices(lease.job_id, cp);
}

bool SqliteQueue::finish_fenced(const Lease& lease, const char* state, const std::string* error_kind,
                                const std::string* error) {
  auto up = db_.cached(std::string(R"(
    UPDATE jobs SET state = ?4, finished_ms = ?5, finished_at = ?6, error_kind = ?7, error = ?8,
                    lease_expires_ms = NULL, lease_expires_at = NULL)") +
                       kFence);
  bind_fence(*up, lease).bind(4, state);
  bind_time(*up, 5, now_epoch_ms());
  bind_errors(*up, 7, error_kind, error).run();
  return db_.changes() == 1;
}

void SqliteQueue::requeue_fenced(const Lease& lease, int64_t delay_ms, const std::string& error_kind,
                                 const std::string& error) {
  auto up = db_.cached(std::string(R"(
    UPDATE jobs SET state = 'queued', worker = NULL, started_ms = NULL, started_at = NULL,
                    lease_expires_ms = NULL, lease_expires_at = NULL,
                    not_before_ms = ?4, not_before_at = ?5, error_kind = ?6, error = ?7)") +
                       kFence);
  bind_time(bind_fence(*up, lease), 4, now_epoch_ms() + delay_ms);
  bind_errors(*up, 6, &error_kind, &error).run();
}

void SqliteQueue::release_fenced(const Lease& lease, bool run_alone, const std::string* held) {
  auto up = db_.cached(std::string(R"(
    UPDATE jobs SET state = 'queued', worker = NULL, started_ms = NULL, started_at = NULL,
                    lease_expires_ms = NULL, lease_expires_at = NULL, attempts = max(attempts - 1, 0),
                    run_alone = max(run_alone, ?4),
                    error_kind = CASE WHEN ?5 IS NOT NULL THEN ?6
                                      WHEN error_kind = ?6 THEN NULL ELSE error_kind END,
                    error = CASE WHEN ?5 IS NOT NULL THEN ?5 WHEN error_kind = ?6 THEN NULL ELSE error END)") +
                       kFence);
  bind_fence(*up, lease).bind(4, int64_t{run_alone});
  if (held) {
    up->bind(5, *held);
  } else {
    up->bind_null(5);
  }
  up->bind(6, std::string(kHeldErrorKind)).run();
}

void SqliteQueue::end_attempt(const Lease& lease, const AttemptEnd& end) {
  auto up = db_.cached(R"(
    UPDATE attempts SET ended_ms = ?3, ended_at = ?4, outcome = ?5, error_kind = ?6, error = ?7
    WHERE job_id = ?1 AND attempt = ?2)");
  up->bind(1, lease.job_id).bind(2, int64_t{lease.attempt});
  bind_time(*up, 3, now_epoch_ms()).bind(5, end.outcome);
  bind_errors(*up, 6, end.error_kind, end.error).run();
}

void SqliteQueue::write_result(int64_t id, const JobResult& r) {
  // The statistics' columns and binds come from jobs/result_stats.h.
  static const std::string sql = [] {
    std::string values = "?1, ?2, ?3, ?4, ?5, ?6";
    for (size_t i = 0; i < std::size(kResultStats); ++i) values += ", ?" + std::to_string(7 + i);
    return "INSERT OR REPLACE INTO results (job_id, text, finish_reason, prompt_tokens, completion_tokens, "
           "prompt_tokens_dropped, " +
           result_stat_columns() + ") VALUES (" + values + ")";
  }();
  auto ins = db_.cached(sql);
  ins->bind(1, id)
      .bind(2, storable_text(r.text))
      .bind(3, r.finish_reason)
      .bind(4, int64_t{r.prompt_tokens})
      .bind(5, int64_t{r.completion_tokens})
      .bind(6, int64_t{r.prompt_tokens_dropped});
  int c = 7;
  for (const ResultStat& st : kResultStats) {
    if (st.real != nullptr)
      ins->bind(c++, stat_real(st, r));
    else
      ins->bind(c++, stat_bytes(st, r));
  }
  ins->run();
  write_result_choices(id, r);
}

void SqliteQueue::drop_checkpoint(int64_t id) {
  db_.cached("DELETE FROM checkpoints WHERE job_id = ?1")->bind(1, id).run();
}

std::vector<int64_t> SqliteQueue::takeable_leases(int64_t now) {
  const auto steady = std::chrono::steady_clock::now();
  // A stopped worker released all it held, and one with no row is gone (a
  // live daemon registers before it claims; an older release's jobs): no need
  // to watch. Any other reason to distrust a lease (expired, or its worker's
  // clock ahead of this one: untrusted_lease_sql) is a reading of two wall clocks.
  auto st = db_.cached("SELECT id, attempt, ifnull(lease_expires_ms, 0), worker, ifnull(" + untrusted_lease_sql("?1") +
                       ", 0), worker IS NULL OR worker IN (SELECT id FROM workers WHERE stopped_ms IS NOT NULL) "
                       "OR worker NOT IN (SELECT id FROM workers) "
                       "FROM jobs WHERE state = 'running' ORDER BY id");
  st->bind(1, now);
  std::map<int64_t, Watched> seen;
  std::vector<int64_t> out;
  while (st->step()) {
    const int64_t id = st->int64(0), attempt = st->int64(1), lease = st->int64(2);
    const bool untrusted = st->int64(4) != 0, stopped = st->int64(5) != 0;
    Watched w{attempt, lease, steady, untrusted, false};
    if (const auto it = watched_.find(id); it != watched_.end() && it->second.attempt == attempt) {
      const Watched& was = it->second;
      if (was.lease_expires_ms == lease) {
        w = was;
        w.seen_untrusted = was.seen_untrusted || untrusted;
      } else {
        w.told = was.told;
        if (was.seen_untrusted && !was.told && on_clock_disagreement_) {
          // Renewed after this clock distrusted it: its holder lives, and the clocks disagree.
          on_clock_disagreement_("job " + std::to_string(id) + ": the lease of worker " + st->text(3) +
                                 " looked expired by this machine's clock (it read " +
                                 iso8601_utc(was.lease_expires_ms) + ", now " + iso8601_utc(now) +
                                 ", or that worker's heartbeat is far ahead of now) but "
                                 "the worker renewed it: it lives, so the clocks of the machines sharing this queue "
                                 "disagree or one jumped (or it stalled past its lease); the job is left to its "
                                 "worker");
          w.told = true;
        }
      }
    }
    seen[id] = w;
    const bool watched_long = lease_watch_ms_ <= 0 || steady - w.since >= std::chrono::milliseconds(lease_watch_ms_);
    if (stopped || (untrusted && watched_long)) out.push_back(id);
  }
  watched_ = std::move(seen);
  return out;
}

bool SqliteQueue::any_orphan(const OrphanScope& scope) {
  if (scope.expired()) return !takeable_leases(now_epoch_ms()).empty();
  return db_.cached("SELECT id FROM jobs WHERE state = 'running' AND worker = ?1 LIMIT 1")
      ->bind(1, scope.worker)
      .step();
}

std::vector<Orphan> SqliteQueue::orphans(const OrphanScope& scope) {
  auto st = db_.cached(std::string("SELECT id, attempt, attempts, max_attempts, cancel_requested, worker, "
                                   "ifnull(lease_expires_ms, 0), run_alone, ") +
                       kSharedCrash + " FROM jobs WHERE state = 'running' AND " +
                       (scope.expired() ? untrusted_lease_sql("?1") : "worker = ?1") + " ORDER BY id");
  std::vector<int64_t> takeable;
  if (scope.expired()) {
    const int64_t now = now_epoch_ms();
    takeable = takeable_leases(now);
    st->bind(1, now);
  } else {
    st->bind(1, scope.worker);
  }
  std::vector<Orphan> out;
  while (st->step()) {
    Orphan o = read_orphan(StmtRow(*st));
    if (scope.expired() && !std::binary_search(takeable.begin(), takeable.end(), o.id)) continue;  // still watched
    out.push_back(std::move(o));
  }
  return out;
}

// Inside BEGIN IMMEDIATE the whole database is locked for writing.
std::optional<std::string> SqliteQueue::locked_state_of(int64_t id) {
  auto st = db_.cached("SELECT state FROM jobs WHERE id = ?1");
  st->bind(1, id);
  if (!st->step()) return std::nullopt;
  return st->text(0);
}

void SqliteQueue::finish_unfenced(int64_t id, const char* state) {
  auto up = db_.cached(R"(
    UPDATE jobs SET state = ?2, finished_ms = ?3, finished_at = ?4, error_kind = NULL, error = NULL,
                    lease_expires_ms = NULL, lease_expires_at = NULL
    WHERE id = ?1)");
  bind_time(up->bind(1, id).bind(2, state), 3, now_epoch_ms()).run();
}

void SqliteQueue::request_cancel(int64_t id) {
  db_.cached("UPDATE jobs SET cancel_requested = 1 WHERE id = ?1")->bind(1, id).run();
}

void SqliteQueue::reset_to_queued(int64_t id, const std::string& model) {
  db_.cached(R"(
    UPDATE jobs SET state = 'queued', attempts = 0, worker = NULL, started_ms = NULL, started_at = NULL,
                    finished_ms = NULL, finished_at = NULL, error_kind = NULL, error = NULL,
                    cancel_requested = 0, not_before_ms = NULL, not_before_at = NULL, run_alone = 0,
                    lease_expires_ms = NULL, lease_expires_at = NULL, model = coalesce(?2, model)
    WHERE id = ?1)")
      ->bind(1, id)
      .bind_text_or_null(2, model)
      .run();
  db_.cached("DELETE FROM results WHERE job_id = ?1")->bind(1, id).run();
}

QueueCounts SqliteQueue::counts_of(const std::string& batch) {
  QueueCounts c;
  auto st = db_.cached("SELECT state, count(*) FROM jobs WHERE ?1 IS NULL OR batch = ?1 GROUP BY state");
  st->bind_text_or_null(1, batch);
  while (st->step()) add_count(c, state_from_column(st->text(0), 0, db_.path()), st->int64(1));
  auto waiting = db_.cached(
      "SELECT count(*) FROM jobs WHERE state = 'queued' AND not_before_ms > ?1 AND not_before_ms <= ?3 "
      "AND error_kind IS NOT NULL AND (?2 IS NULL OR batch = ?2)");
  const int64_t now = now_epoch_ms();
  waiting->bind(1, now).bind_text_or_null(2, batch).bind(3, backoff_horizon(now));
  if (waiting->step()) c.retry_waiting = waiting->int64(0);
  auto held = db_.cached(
      "SELECT model, count(*), max(error) FROM jobs WHERE state = 'queued' AND error_kind = ?1 "
      "AND (?2 IS NULL OR batch = ?2) GROUP BY model ORDER BY model");
  held->bind(1, std::string_view(kHeldErrorKind)).bind_text_or_null(2, batch);
  std::vector<HeldModel> models;
  while (held->step()) {
    models.push_back({held->text(0), held->int64(1), held->text(2)});
    c.held += models.back().jobs;
  }
  c.held_reason = held_reason_text(models);
  return c;
}

std::optional<int64_t> SqliteQueue::id_for_key(const std::string& key) {
  if (key.empty()) return std::nullopt;
  auto find = db_.cached("SELECT id FROM jobs WHERE idempotency_key = ?1");
  find->bind(1, key);
  if (!find->step()) return std::nullopt;
  return find->int64(0);
}

}  // namespace ns::jobs::sqlite
