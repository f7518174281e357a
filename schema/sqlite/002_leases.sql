-- 002_leases: leases with fencing, retries with backoff, the `dead` state, an
-- `attempts` history and generation checkpoints.
--
-- The `state` CHECK of 001 cannot be altered in place, so `jobs` is rebuilt
-- with SQLite's documented recipe (create the new table, copy, drop, rename,
-- recreate indexes and views). jobs/sqlite_migrate.cpp runs every migration
-- with foreign_keys OFF (otherwise dropping `jobs` would cascade into
-- `results`) and checks PRAGMA foreign_key_check before it commits.

DROP VIEW job_summary;

CREATE TABLE jobs_v2 (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  model            TEXT    NOT NULL CHECK (model <> ''),
  prompt           TEXT    NOT NULL CHECK (prompt <> ''),

  max_tokens       INTEGER NOT NULL,
  temperature      REAL    NOT NULL,
  top_k            INTEGER NOT NULL,
  top_p            REAL    NOT NULL,
  min_p            REAL    NOT NULL,
  repeat_penalty   REAL    NOT NULL,
  repeat_last_n    INTEGER NOT NULL,
  seed             INTEGER NOT NULL,
  stop             TEXT    NOT NULL DEFAULT '[]'
                   CHECK (json_valid(stop) AND json_type(stop) = 'array'),
  ignore_eos       INTEGER NOT NULL DEFAULT 0 CHECK (ignore_eos IN (0, 1)),

  priority         INTEGER NOT NULL DEFAULT 0,
  idempotency_key  TEXT UNIQUE,

  state            TEXT    NOT NULL DEFAULT 'queued'
                   CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled', 'dead')),
  created_ms       INTEGER NOT NULL,
  created_at       TEXT    NOT NULL,
  started_ms       INTEGER,
  started_at       TEXT,
  finished_ms      INTEGER,
  finished_at      TEXT,
  worker           TEXT,                 -- lease holder while running (else the last one)
  attempts         INTEGER NOT NULL DEFAULT 0,  -- claims that count toward max_attempts
  cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
  error_kind       TEXT,
  error            TEXT,

  -- New in 002.
  max_attempts     INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
  -- Number of the latest claim (1, 2, ...; never reused, unlike `attempts`,
  -- which a graceful release gives back). With `worker` it is the fence: a
  -- write by a worker whose lease was taken over matches no row.
  attempt          INTEGER NOT NULL DEFAULT 0,
  lease_expires_ms INTEGER,              -- running jobs: the claim lapses after this
  lease_expires_at TEXT,
  not_before_ms    INTEGER,              -- queued jobs are not claimed before this (retry backoff)
  not_before_at    TEXT
);

INSERT INTO jobs_v2 (id, model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                     repeat_last_n, seed, stop, ignore_eos, priority, idempotency_key, state, created_ms,
                     created_at, started_ms, started_at, finished_ms, finished_at, worker, attempts,
                     cancel_requested, error_kind, error, attempt, lease_expires_ms, lease_expires_at)
SELECT id, model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
       repeat_last_n, seed, stop, ignore_eos, priority, idempotency_key, state, created_ms,
       created_at, started_ms, started_at, finished_ms, finished_at, worker, attempts,
       cancel_requested, error_kind, error,
       attempts,
       -- A job running under the old schema has no lease: treat it as expired,
       -- so the first daemon to start recovers it.
       CASE WHEN state = 'running' THEN 0 END,
       CASE WHEN state = 'running' THEN '1970-01-01T00:00:00.000Z' END
FROM jobs;

-- Ids are never reused: carry the AUTOINCREMENT high-water mark over (rows
-- deleted at the end of the old table would otherwise free their ids).
DELETE FROM sqlite_sequence WHERE name = 'jobs_v2';
INSERT INTO sqlite_sequence (name, seq) SELECT 'jobs_v2', seq FROM sqlite_sequence WHERE name = 'jobs';

DROP TABLE jobs;
ALTER TABLE jobs_v2 RENAME TO jobs;

CREATE INDEX jobs_claim_order ON jobs (state, priority DESC, id);
CREATE INDEX jobs_state ON jobs (state, id);

-- One row per claim: who ran it, when, and how that attempt ended.
CREATE TABLE attempts (
  job_id          INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  attempt         INTEGER NOT NULL,     -- jobs.attempt at the claim
  worker          TEXT    NOT NULL,
  started_ms      INTEGER NOT NULL,
  started_at      TEXT    NOT NULL,
  resumed_tokens  INTEGER NOT NULL DEFAULT 0,  -- checkpointed tokens it started from
  ended_ms        INTEGER,              -- NULL while it runs
  ended_at        TEXT,
  outcome         TEXT CHECK (outcome IN ('done', 'failed', 'cancelled', 'released', 'transient_error',
                                          'lease_expired', 'abandoned')),
  error_kind      TEXT,
  error           TEXT,
  PRIMARY KEY (job_id, attempt)
);

-- History for jobs claimed under 001 (one row for their latest claim).
INSERT INTO attempts (job_id, attempt, worker, started_ms, started_at, ended_ms, ended_at, outcome,
                      error_kind, error)
SELECT id, attempt, ifnull(worker, ''), started_ms, started_at, finished_ms, finished_at,
       CASE state WHEN 'done' THEN 'done' WHEN 'failed' THEN 'failed' WHEN 'cancelled' THEN 'cancelled' END,
       error_kind, error
FROM jobs
WHERE attempt > 0 AND started_ms IS NOT NULL;

-- The completion tokens generated so far by a queued or running job, saved
-- every few tokens or seconds so an interrupted job resumes instead of
-- starting over. Deleted when the job ends.
CREATE TABLE checkpoints (
  job_id       INTEGER PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
  attempt      INTEGER NOT NULL,        -- the attempt that saved it
  token_count  INTEGER NOT NULL CHECK (token_count >= 0),
  tokens       TEXT    NOT NULL CHECK (json_valid(tokens) AND json_type(tokens) = 'array'),  -- token ids
  saved_ms     INTEGER NOT NULL,
  saved_at     TEXT    NOT NULL
);

-- Unchanged from 001 (dropped above only because `jobs` was rebuilt).
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
