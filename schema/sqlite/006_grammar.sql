-- 006_grammar: constrained decoding. The GBNF grammar a job's output must
-- follow (engine/grammar/grammar.h); JSON schemas and JSON mode are compiled
-- to it at submit time. '' = unconstrained.
ALTER TABLE jobs ADD COLUMN grammar TEXT NOT NULL DEFAULT '';
