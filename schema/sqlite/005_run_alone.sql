-- 005_run_alone: crash blame. A job whose daemon died while it ran beside
-- other jobs is not charged the attempt (nobody knows which job, if any,
-- crashed the process); it is marked run_alone instead and is claimed only by
-- a daemon with nothing else running, so the next crash, if it comes, is its
-- own and counts. Cleared when the job is retried. A `dead` job now keeps its
-- checkpoint, so `nightshift retry` resumes it (docs/operations.md, "A bad night").
ALTER TABLE jobs ADD COLUMN run_alone INTEGER NOT NULL DEFAULT 0 CHECK (run_alone IN (0, 1));
-- Recovery asks which attempts a worker had open or lost (jobs/queue_transitions.h, kSharedCrash).
CREATE INDEX attempts_worker ON attempts (worker, ended_ms);
