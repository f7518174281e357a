-- openai_api: as schema/sqlite/012_openai_api.sql: the files and batch
-- objects of the OpenAI-compatible API (daemon/http/, jobs/api_store.h);
-- times in unix seconds, seq orders the lists.
CREATE TABLE api_files (
  seq        bigserial PRIMARY KEY,
  id         text    NOT NULL UNIQUE,
  filename   text    NOT NULL,
  purpose    text    NOT NULL CHECK (purpose IN ('batch', 'batch_output')),
  bytes      bigint  NOT NULL CHECK (bytes >= 0),
  created_at bigint  NOT NULL,
  content    text    NOT NULL  -- JSONL: an upload (validated) or a batch's output or error lines
);

CREATE TABLE api_batches (
  seq               bigserial PRIMARY KEY,
  id                text    NOT NULL UNIQUE,
  endpoint          text    NOT NULL CHECK (endpoint IN ('/v1/chat/completions', '/v1/completions')),
  input_file_id     text    NOT NULL,
  completion_window text    NOT NULL,
  status            text    NOT NULL CHECK (status IN ('validating', 'in_progress', 'finalizing', 'completed',
                                                       'failed', 'cancelling', 'cancelled', 'expired')),
  output_file_id    text,
  error_file_id     text,
  errors            text,     -- JSON array: the lines refused at validation
  model             text,     -- the model that runs its jobs (a name under the config's models:)
  metadata          text,     -- JSON object
  total             bigint  NOT NULL DEFAULT 0 CHECK (total >= 0),
  rejected          bigint  NOT NULL DEFAULT 0 CHECK (rejected >= 0),
  completed         bigint  NOT NULL DEFAULT 0 CHECK (completed >= 0),
  failed            bigint  NOT NULL DEFAULT 0 CHECK (failed >= 0),
  input_tokens      bigint NOT NULL DEFAULT 0,  -- usage, summed over its jobs when it ends
  output_tokens     bigint NOT NULL DEFAULT 0,
  cached_tokens     bigint NOT NULL DEFAULT 0,
  created_at        bigint  NOT NULL,
  in_progress_at    bigint,
  expires_at        bigint,
  finalizing_at     bigint,
  completed_at      bigint,
  failed_at         bigint,
  expired_at        bigint,
  cancelling_at     bigint,
  cancelled_at      bigint
);
