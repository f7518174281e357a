-- 004_worker_problem: what keeps a daemon from serving jobs because of its
-- own configuration (a model not in its config, a memory_budget too small to
-- load a model), shown by `nightshift status`; '' when nothing does. The jobs
-- it concerns stay queued (docs/operations.md, "A bad night").
ALTER TABLE workers ADD COLUMN problem TEXT NOT NULL DEFAULT '';
