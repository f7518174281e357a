-- 003_workflows: chat jobs, named batches (JSONL, document folders) with their
-- provenance, live progress of running jobs, weight-streaming and batching
-- stats in the results, the fleet of daemons (`workers`), and the views
-- people read in a SQLite browser (`job_summary`, `batch_summary`).
--
-- `prompt` becomes NULL for chat jobs (they hold `messages` instead); its
-- NOT NULL cannot be altered in place, so `jobs` is rebuilt with SQLite's
-- recipe, as in 002 (foreign keys are off while migrations run).

DROP VIEW job_summary;

CREATE TABLE jobs_v3 (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  model            TEXT    NOT NULL CHECK (model <> ''),
  -- Exactly one input: a prompt to continue, or chat messages to render with
  -- the model's chat template.
  prompt           TEXT    CHECK (prompt <> ''),
  messages         TEXT    CHECK (messages IS NULL OR (json_valid(messages) AND json_type(messages) = 'array')),

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
  worker           TEXT,
  attempts         INTEGER NOT NULL DEFAULT 0,
  cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
  error_kind       TEXT,
  error            TEXT,
  max_attempts     INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
  attempt          INTEGER NOT NULL DEFAULT 0,
  lease_expires_ms INTEGER,
  lease_expires_at TEXT,
  not_before_ms    INTEGER,
  not_before_at    TEXT,

  -- New in 003: where the job came from.
  batch            TEXT    CHECK (batch <> ''),      -- a named batch (submit --jsonl / --dir)
  custom_id        TEXT    CHECK (custom_id <> ''),  -- the JSONL line's custom_id
  source_path      TEXT,                             -- the input file
  source_line      INTEGER CHECK (source_line >= 1), -- its line, for JSONL
  -- Live progress of a running job, written with its heartbeats.
  progress_prompt_tokens INTEGER,
  progress_prefilled     INTEGER,
  progress_generated     INTEGER,
  progress_tok_s         REAL,
  progress_ms            INTEGER,
  progress_at            TEXT,

  CHECK ((prompt IS NULL) <> (messages IS NULL))
);

INSERT INTO jobs_v3 (id, model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                     repeat_last_n, seed, stop, ignore_eos, priority, idempotency_key, state, created_ms,
                     created_at, started_ms, started_at, finished_ms, finished_at, worker, attempts,
                     cancel_requested, error_kind, error, max_attempts, attempt, lease_expires_ms,
                     lease_expires_at, not_before_ms, not_before_at)
SELECT id, model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
       repeat_last_n, seed, stop, ignore_eos, priority, idempotency_key, state, created_ms,
       created_at, started_ms, started_at, finished_ms, finished_at, worker, attempts,
       cancel_requested, error_kind, error, max_attempts, attempt, lease_expires_ms,
       lease_expires_at, not_before_ms, not_before_at
FROM jobs;

DELETE FROM sqlite_sequence WHERE name = 'jobs_v3';
INSERT INTO sqlite_sequence (name, seq) SELECT 'jobs_v3', seq FROM sqlite_sequence WHERE name = 'jobs';

DROP TABLE jobs;
ALTER TABLE jobs_v3 RENAME TO jobs;

CREATE INDEX jobs_claim_order ON jobs (state, priority DESC, id);
CREATE INDEX jobs_state ON jobs (state, id);
-- Exports and counts of one batch; custom_id is unique within its batch.
CREATE INDEX jobs_batch ON jobs (batch, id) WHERE batch IS NOT NULL;
CREATE UNIQUE INDEX jobs_batch_custom_id ON jobs (batch, custom_id) WHERE batch IS NOT NULL AND custom_id IS NOT NULL;
-- `nightshift status`: the last finished jobs.
CREATE INDEX jobs_finished ON jobs (finished_ms) WHERE finished_ms IS NOT NULL;

-- Results: how reading the weights went, and how many jobs shared the steps.
ALTER TABLE results ADD COLUMN read_gib_s        REAL NOT NULL DEFAULT 0;  -- read rate while reads were in flight
ALTER TABLE results ADD COLUMN io_wait_ms        REAL NOT NULL DEFAULT 0;  -- compute blocked on expert reads
ALTER TABLE results ADD COLUMN compute_ms        REAL NOT NULL DEFAULT 0;  -- prefill + decode not spent waiting
ALTER TABLE results ADD COLUMN cache_hit_rate    REAL NOT NULL DEFAULT 0;  -- expert cache hits / lookups
ALTER TABLE results ADD COLUMN prefetch_accuracy REAL NOT NULL DEFAULT 0;  -- prefetched experts then used
ALTER TABLE results ADD COLUMN avg_batch_size    REAL NOT NULL DEFAULT 0;  -- jobs decoded together, on average

-- The daemons taking jobs from this queue.
CREATE TABLE workers (
  id            TEXT    PRIMARY KEY,      -- worker_id
  host          TEXT    NOT NULL,
  pid           INTEGER NOT NULL,
  model         TEXT    NOT NULL DEFAULT '',  -- the model loaded now ('' = none)
  version       TEXT    NOT NULL,
  started_ms    INTEGER NOT NULL,
  started_at    TEXT    NOT NULL,
  heartbeat_ms  INTEGER NOT NULL,
  heartbeat_at  TEXT    NOT NULL,
  stopped_ms    INTEGER,                  -- set on a clean exit
  stopped_at    TEXT,
  jobs          TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(jobs) AND json_type(jobs) = 'array')
);

-- One line per job for people: open the file in any SQLite browser and look here.
CREATE VIEW job_summary AS
SELECT
  j.id,
  j.state,
  j.model,
  j.batch,
  j.custom_id,
  j.created_at                                   AS created,
  j.finished_at                                  AS finished,
  j.created_ms,
  j.finished_ms,
  CASE WHEN j.state = 'running' THEN j.progress_generated ELSE r.completion_tokens END AS tokens,
  j.max_tokens,
  round(CASE WHEN j.state = 'running' THEN j.progress_tok_s ELSE r.decode_tok_s END, 2) AS tok_s,
  substr(replace(replace(r.text, char(13), ' '), char(10), ' '), 1, 80) AS output,
  CASE WHEN j.error IS NULL THEN NULL ELSE j.error_kind || ': ' || j.error END AS error,
  coalesce(j.source_path || CASE WHEN j.source_line IS NULL THEN '' ELSE ':' || j.source_line END, '') AS source
FROM jobs AS j
LEFT JOIN results AS r ON r.job_id = j.id;

-- One line per named batch.
CREATE VIEW batch_summary AS
SELECT
  j.batch,
  count(*)                                               AS jobs,
  sum(j.state = 'queued')                                AS queued,
  sum(j.state = 'running')                               AS running,
  sum(j.state = 'done')                                  AS done,
  sum(j.state = 'failed')                                AS failed,
  sum(j.state = 'cancelled')                             AS cancelled,
  sum(j.state = 'dead')                                  AS dead,
  min(j.created_at)                                      AS created,
  CASE WHEN sum(j.state IN ('queued', 'running')) = 0 THEN max(j.finished_at) END AS finished,
  min(j.created_ms)                                      AS created_ms,
  CASE WHEN sum(j.state IN ('queued', 'running')) = 0 THEN max(j.finished_ms) END AS finished_ms,
  sum(r.prompt_tokens)                                   AS prompt_tokens,
  sum(r.completion_tokens)                               AS completion_tokens,
  round(sum(r.completion_tokens) * 1000.0 / nullif(sum(r.decode_ms), 0), 2) AS decode_tok_s
FROM jobs AS j
LEFT JOIN results AS r ON r.job_id = j.id
WHERE j.batch IS NOT NULL
GROUP BY j.batch;
