-- 004_grammar: as schema/sqlite/006_grammar.sql: the GBNF grammar a job's
-- output must follow; '' = unconstrained.
ALTER TABLE jobs ADD COLUMN grammar text NOT NULL DEFAULT '';
