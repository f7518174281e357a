-- prefix_sharing: as schema/sqlite/011_prefix_sharing.sql: prompt tokens a
-- job copied from a prefix snapshot instead of prefilling them (0 otherwise).
ALTER TABLE results ADD COLUMN prefix_tokens bigint NOT NULL DEFAULT 0 CHECK (prefix_tokens >= 0);
