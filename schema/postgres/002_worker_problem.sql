-- 002_worker_problem: as schema/sqlite/004_worker_problem.sql: what keeps a
-- daemon from serving jobs because of its own configuration; '' when nothing does.
ALTER TABLE workers ADD COLUMN problem text NOT NULL DEFAULT '';
