-- queue_migrations: as schema/sqlite/010_queue_migrations.sql: what
-- `nightshift migrate-queue` has copied into this queue, one row per source
-- queue, updated in each page's transaction (last_source_id is a high-water
-- mark), so a copy is exactly-once and a cut-off run resumes.
CREATE TABLE queue_migrations (
  source          text PRIMARY KEY,
  keep_ids        boolean NOT NULL,
  started_ms      bigint NOT NULL,
  updated_ms      bigint NOT NULL,
  finished_ms     bigint,
  last_source_id  bigint NOT NULL DEFAULT 0,
  copied          bigint NOT NULL DEFAULT 0,
  skipped         bigint NOT NULL DEFAULT 0
);
