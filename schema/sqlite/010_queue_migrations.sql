-- queue_migrations: what `nightshift migrate-queue` has copied into this
-- queue, one row per source queue, so a copy is exactly-once and resumable.
-- Each page of jobs is inserted in one transaction together with this row's
-- update, so `last_source_id` is a true high-water mark: every job of the
-- source with an id up to it is here (or was skipped for its idempotency
-- key), none above it. A run cut off (killed, a lost connection, a refused
-- row) leaves finished_ms NULL; running the same command again continues
-- after last_source_id, and a later --append run copies only the jobs the
-- source got since (daemon/cli/migrate_queue_command.cpp).
CREATE TABLE queue_migrations (
  -- The source queue: its SQLite file's canonical path, or its postgresql://
  -- URL without the password.
  source          TEXT PRIMARY KEY,
  -- 1: the jobs kept their ids (a copy into an empty queue); 0: --append.
  keep_ids        INTEGER NOT NULL CHECK (keep_ids IN (0, 1)),
  started_ms      INTEGER NOT NULL,
  -- The last page's commit.
  updated_ms      INTEGER NOT NULL,
  -- NULL while a run is under way or after one was cut off.
  finished_ms     INTEGER,
  last_source_id  INTEGER NOT NULL DEFAULT 0,
  copied          INTEGER NOT NULL DEFAULT 0,
  -- Jobs not inserted because their idempotency key named a job here already.
  skipped         INTEGER NOT NULL DEFAULT 0
);
