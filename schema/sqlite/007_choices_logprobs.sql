-- choices_logprobs: several choices per job (OpenAI's `n`) and per-token
-- logprobs (`logprobs`, `top_logprobs`); docs/batch-jsonl.md has the semantics.
--
-- A choice-0 rule keeps every earlier reader right: a job's first choice lives
-- where a single-choice job's output always has (results.text, checkpoints.tokens);
-- the new columns hold only choices 1..n-1 and the logprob records. Only
-- columns are added (no rebuild), so old rows read as n = 1 without logprobs.

-- Choices wanted (choice k is drawn with seed + k); at most the daemon's max_batch.
ALTER TABLE jobs ADD COLUMN n INTEGER NOT NULL DEFAULT 1 CHECK (n BETWEEN 1 AND 128);
-- NULL: no logprobs; k: each generated token's logprob and its k most likely alternatives.
ALTER TABLE jobs ADD COLUMN top_logprobs INTEGER CHECK (top_logprobs IS NULL OR top_logprobs BETWEEN 0 AND 20);

-- Choices 1..n-1 as [{"text", "finish_reason", "completion_tokens"}]; NULL when n = 1.
-- results.completion_tokens sums every choice's tokens (OpenAI's usage).
ALTER TABLE results ADD COLUMN choices TEXT
  CHECK (choices IS NULL OR (json_valid(choices) AND json_type(choices) = 'array'));
-- Every choice's logprob records in one value: base64 of a little-endian binary
-- record (engine/sampler/logprobs.h), 8 bytes per entry, (1 + top_logprobs)
-- entries per token; NULL without logprobs.
ALTER TABLE results ADD COLUMN logprobs TEXT;

-- The same for a running job's checkpoint: choices 1..n-1's tokens as
-- [[ids], ...] (checkpoints.tokens is choice 0's), and the records of every
-- checkpointed token, so a resumed job reports what an uninterrupted one does.
ALTER TABLE checkpoints ADD COLUMN choices TEXT
  CHECK (choices IS NULL OR (json_valid(choices) AND json_type(choices) = 'array'));
ALTER TABLE checkpoints ADD COLUMN logprobs TEXT;
