-- batch_rates: as schema/sqlite/NNN_batch_rates.sql: results.decode_share_ms
-- (the job's share of the wall time of the steps that decoded its tokens),
-- jobs.progress_eta_s (the daemon's estimate at progress_ms of the seconds
-- left), and batch_summary's decode_tok_s as the batch's rate, with the
-- per-job figure as job_decode_tok_s and the loads the batch paid as load_ms.
ALTER TABLE results ADD COLUMN decode_share_ms double precision NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN progress_eta_s double precision;

DROP VIEW batch_summary;
CREATE VIEW batch_summary AS
SELECT
  j.batch,
  count(*)                                                AS jobs,
  count(*) FILTER (WHERE j.state = 'queued')              AS queued,
  count(*) FILTER (WHERE j.state = 'running')             AS running,
  count(*) FILTER (WHERE j.state = 'done')                AS done,
  count(*) FILTER (WHERE j.state = 'failed')              AS failed,
  count(*) FILTER (WHERE j.state = 'cancelled')           AS cancelled,
  count(*) FILTER (WHERE j.state = 'dead')                AS dead,
  min(j.created_at)                                       AS created,
  CASE WHEN count(*) FILTER (WHERE j.state IN ('queued', 'running')) = 0 THEN max(j.finished_at) END AS finished,
  min(j.created_ms)                                       AS created_ms,
  CASE WHEN count(*) FILTER (WHERE j.state IN ('queued', 'running')) = 0 THEN max(j.finished_ms) END AS finished_ms,
  sum(r.prompt_tokens)                                    AS prompt_tokens,
  sum(r.completion_tokens)                                AS completion_tokens,
  -- decode_tok_s * decode_ms / 1000 is the tokens a job decoded (replayed checkpoint tokens excluded).
  round(coalesce(sum(r.decode_tok_s * r.decode_ms) / nullif(sum(r.decode_share_ms), 0),
                 sum(r.completion_tokens) * 1000.0 / nullif(sum(r.decode_ms), 0))::numeric, 2) AS decode_tok_s,
  round((sum(r.completion_tokens) * 1000.0 / nullif(sum(r.decode_ms), 0))::numeric, 2) AS job_decode_tok_s,
  sum(r.load_ms)                                          AS load_ms
FROM jobs AS j
LEFT JOIN results AS r ON r.job_id = j.id
WHERE j.batch IS NOT NULL
GROUP BY j.batch;
