-- held_jobs: as schema/sqlite/013_held_jobs.sql: job_summary.held is a held
-- job's reason (a daemon that cannot serve its model released it), and
-- batch_summary counts a batch's held jobs with one of their reasons.
DROP VIEW job_summary;
CREATE VIEW job_summary AS
SELECT
  j.id,
  j.state,
  j.model,
  j.batch,
  j.custom_id,
  j.created_at                                   AS created,
  j.finished_at                                  AS finished,
  j.created_ms,
  j.finished_ms,
  CASE WHEN j.state = 'running' THEN j.progress_generated ELSE r.completion_tokens END AS tokens,
  j.max_tokens,
  round((CASE WHEN j.state = 'running' THEN j.progress_tok_s ELSE r.decode_tok_s END)::numeric, 2) AS tok_s,
  substr(replace(replace(r.text, chr(13), ' '), chr(10), ' '), 1, 80) AS output,
  CASE WHEN j.error IS NULL THEN NULL ELSE j.error_kind || ': ' || j.error END AS error,
  coalesce(j.source_path || CASE WHEN j.source_line IS NULL THEN '' ELSE ':' || j.source_line END, '') AS source,
  CASE WHEN j.state = 'queued' AND j.error_kind = 'daemon_config' THEN j.error END AS held
FROM jobs AS j
LEFT JOIN results AS r ON r.job_id = j.id;

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
  sum(r.load_ms)                                          AS load_ms,
  count(*) FILTER (WHERE j.state = 'queued' AND j.error_kind = 'daemon_config') AS held,
  max(j.error) FILTER (WHERE j.state = 'queued' AND j.error_kind = 'daemon_config') AS held_reason
FROM jobs AS j
LEFT JOIN results AS r ON r.job_id = j.id
WHERE j.batch IS NOT NULL
GROUP BY j.batch;
