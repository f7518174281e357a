-- prefix_sharing: prompt tokens a job copied from a prefix snapshot another
-- job of its batch prefilled (engine/generation_batch.h, docs/batching.md)
-- instead of computing them. 0 for every job that computed its whole prompt
-- and for rows written before.
ALTER TABLE results ADD COLUMN prefix_tokens INTEGER NOT NULL DEFAULT 0 CHECK (prefix_tokens >= 0);
