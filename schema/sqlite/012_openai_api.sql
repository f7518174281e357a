-- openai_api: the objects of nightshiftd's OpenAI-compatible Files and
-- Batches API (daemon/http/, jobs/api_store.h). Times are unix seconds, as
-- the API reports them (NULL = not yet). seq orders the lists (newest first).
-- A batch's jobs are ordinary jobs whose `batch` column is the batch's id.
CREATE TABLE api_files (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  id         TEXT    NOT NULL UNIQUE,
  filename   TEXT    NOT NULL,
  purpose    TEXT    NOT NULL CHECK (purpose IN ('batch', 'batch_output')),
  bytes      INTEGER NOT NULL CHECK (bytes >= 0),
  created_at INTEGER NOT NULL,
  content    TEXT    NOT NULL  -- JSONL: an upload (validated) or a batch's output or error lines
);

CREATE TABLE api_batches (
  seq               INTEGER PRIMARY KEY AUTOINCREMENT,
  id                TEXT    NOT NULL UNIQUE,
  endpoint          TEXT    NOT NULL CHECK (endpoint IN ('/v1/chat/completions', '/v1/completions')),
  input_file_id     TEXT    NOT NULL,
  completion_window TEXT    NOT NULL,
  status            TEXT    NOT NULL CHECK (status IN ('validating', 'in_progress', 'finalizing', 'completed',
                                                       'failed', 'cancelling', 'cancelled', 'expired')),
  output_file_id    TEXT,
  error_file_id     TEXT,
  errors            TEXT,     -- JSON array: the lines refused at validation
  model             TEXT,     -- the model that runs its jobs (a name under the config's models:)
  metadata          TEXT,     -- JSON object
  total             INTEGER NOT NULL DEFAULT 0 CHECK (total >= 0),
  rejected          INTEGER NOT NULL DEFAULT 0 CHECK (rejected >= 0),
  completed         INTEGER NOT NULL DEFAULT 0 CHECK (completed >= 0),
  failed            INTEGER NOT NULL DEFAULT 0 CHECK (failed >= 0),
  input_tokens      INTEGER NOT NULL DEFAULT 0,  -- usage, summed over its jobs when it ends
  output_tokens     INTEGER NOT NULL DEFAULT 0,
  cached_tokens     INTEGER NOT NULL DEFAULT 0,
  created_at        INTEGER NOT NULL,
  in_progress_at    INTEGER,
  expires_at        INTEGER,
  finalizing_at     INTEGER,
  completed_at      INTEGER,
  failed_at         INTEGER,
  expired_at        INTEGER,
  cancelling_at     INTEGER,
  cancelled_at      INTEGER
);
