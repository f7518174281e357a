-- long_context: as schema/sqlite/NNN_long_context.sql: prompt tokens a long
-- document dropped from its front to fit the context (0 otherwise).
ALTER TABLE results ADD COLUMN prompt_tokens_dropped integer NOT NULL DEFAULT 0 CHECK (prompt_tokens_dropped >= 0);
