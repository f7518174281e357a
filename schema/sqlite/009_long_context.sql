-- long_context: a document (`submit --dir`) longer than the context keeps its
-- tail rather than failing (docs/long-context.md); its result says how many
-- prompt tokens were dropped from the front. results.prompt_tokens counts the
-- tokens kept. 0 for every other job and for rows written before.
ALTER TABLE results ADD COLUMN prompt_tokens_dropped INTEGER NOT NULL DEFAULT 0 CHECK (prompt_tokens_dropped >= 0);
