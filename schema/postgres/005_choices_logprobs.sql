-- choices_logprobs: as schema/sqlite/NNN_choices_logprobs.sql: several
-- choices per job (`n`) and per-token logprobs; choice 0 stays where a
-- single-choice job's output is, the new columns hold choices 1..n-1 and the
-- logprob records (base64 text, engine/sampler/logprobs.h).
ALTER TABLE jobs ADD COLUMN n integer NOT NULL DEFAULT 1 CHECK (n BETWEEN 1 AND 128);
ALTER TABLE jobs ADD COLUMN top_logprobs integer CHECK (top_logprobs IS NULL OR top_logprobs BETWEEN 0 AND 20);
ALTER TABLE results ADD COLUMN choices jsonb CHECK (choices IS NULL OR jsonb_typeof(choices) = 'array');
ALTER TABLE results ADD COLUMN logprobs text;
ALTER TABLE checkpoints ADD COLUMN choices jsonb CHECK (choices IS NULL OR jsonb_typeof(choices) = 'array');
ALTER TABLE checkpoints ADD COLUMN logprobs text;
