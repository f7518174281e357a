-- 003_run_alone: as schema/sqlite/005_run_alone.sql: a job that crashed beside
-- others is not charged the attempt and runs alone next.
ALTER TABLE jobs ADD COLUMN run_alone boolean NOT NULL DEFAULT false;
CREATE INDEX attempts_worker ON attempts (worker, ended_ms);
