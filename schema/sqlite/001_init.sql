-- 001_init: the job queue, its results and a summary view for humans.
--
-- Applied once, inside a BEGIN IMMEDIATE transaction, by jobs/sqlite_migrate.cpp
-- (which then sets PRAGMA user_version = 1). Times are stored twice: epoch
-- milliseconds for arithmetic and ISO-8601 UTC text for people reading the file
-- in a SQLite browser. See schema/README.md for every column.

CREATE TABLE jobs (
  -- AUTOINCREMENT: ids are never reused, even after rows are deleted, so an id
  -- printed by `nightshift submit` always names the same job.
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  model            TEXT    NOT NULL CHECK (model <> ''),
  prompt           TEXT    NOT NULL CHECK (prompt <> ''),

  -- Sampling parameters (common/sampling_params.h), one column each.
  max_tokens       INTEGER NOT NULL,
  temperature      REAL    NOT NULL,
  top_k            INTEGER NOT NULL,
  top_p            REAL    NOT NULL,
  min_p            REAL    NOT NULL,
  repeat_penalty   REAL    NOT NULL,
  repeat_last_n    INTEGER NOT NULL,
  seed             INTEGER NOT NULL,   -- the uint64 seed's bits as a signed 64-bit integer
  stop             TEXT    NOT NULL DEFAULT '[]'
                   CHECK (json_valid(stop) AND json_type(stop) = 'array'),
  ignore_eos       INTEGER NOT NULL DEFAULT 0 CHECK (ignore_eos IN (0, 1)),

  priority         INTEGER NOT NULL DEFAULT 0,  -- higher runs first
  idempotency_key  TEXT UNIQUE,                 -- NULL = none (UNIQUE allows many NULLs)

  state            TEXT    NOT NULL DEFAULT 'queued'
                   CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
  created_ms       INTEGER NOT NULL,
  created_at       TEXT    NOT NULL,
  started_ms       INTEGER,              -- last claim; NULL while queued
  started_at       TEXT,
  finished_ms      INTEGER,              -- NULL until done, failed or cancelled
  finished_at      TEXT,
  worker           TEXT,                 -- the daemon that claimed it (worker_id)
  attempts         INTEGER NOT NULL DEFAULT 0,
  cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
  error_kind       TEXT,                 -- invalid_input, bad_model, io, database, internal
  error            TEXT
);

-- The claim query reads this index front to back within state 'queued': best
-- priority, then oldest. (Not a partial index: without ANALYZE statistics the
-- planner would prefer jobs_state and sort every queued row on each claim.)
CREATE INDEX jobs_claim_order ON jobs (state, priority DESC, id);
-- `nightshift list --state S` and the counts.
CREATE INDEX jobs_state ON jobs (state, id);

CREATE TABLE results (
  job_id            INTEGER PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
  text              TEXT    NOT NULL,
  finish_reason     TEXT    NOT NULL,   -- stop, length, cancelled
  prompt_tokens     INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL,
  queue_wait_ms     REAL    NOT NULL,   -- started - created
  load_ms           REAL    NOT NULL,   -- 0 when the model was already loaded
  prefill_ms        REAL    NOT NULL,
  decode_ms         REAL    NOT NULL,
  prefill_tok_s     REAL    NOT NULL,
  decode_tok_s      REAL    NOT NULL,
  peak_rss_bytes    INTEGER NOT NULL,   -- VmHWM of the daemon after the job
  bytes_read        INTEGER NOT NULL    -- weight bytes read from disk for this job
);

-- One line per job for people: open the file in any SQLite browser and look here.
CREATE VIEW job_summary AS
SELECT
  j.id,
  j.state,
  j.model,
  j.created_at                                   AS created,
  j.finished_at                                  AS finished,
  r.completion_tokens                            AS tokens,
  round(r.decode_tok_s, 2)                       AS tok_s,
  substr(replace(replace(r.text, char(13), ' '), char(10), ' '), 1, 80) AS output,
  CASE WHEN j.error IS NULL THEN NULL ELSE j.error_kind || ': ' || j.error END AS error
FROM jobs AS j
LEFT JOIN results AS r ON r.job_id = j.id;
