-- held_jobs: a queued job a daemon released because its own configuration
-- cannot serve the job's model (a model name or file it lacks, a model that
-- does not fit) is held: its error_kind is 'daemon_config' and its error the
-- daemon's reason (jobs/queue.h, is_held). The views say so: job_summary's
-- `held` is that reason (NULL for every other job), batch_summary counts the
-- held jobs of a batch (`held`, of the `queued`) with one of their reasons.
-- No table changes.
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
  round(CASE WHEN j.state = 'running' THEN j.progress_tok_s ELSE r.decode_tok_s END, 2) AS tok_s,
  substr(replace(replace(r.text, char(13), ' '), char(10), ' '), 1, 80) AS output,
  CASE WHEN j.error IS NULL THEN NULL ELSE j.error_kind || ': ' || j.error END AS error,
  coalesce(j.source_path || CASE WHEN j.source_line IS NULL THEN '' ELSE ':' || j.source_line END, '') AS source,
  CASE WHEN j.state = 'queued' AND j.error_kind = 'daemon_config' THEN j.error END AS held
FROM jobs AS j
LEFT JOIN results AS r ON r.job_id = j.id;

DROP VIEW batch_summary;
CREATE VIEW batch_summary AS
SELECT
  j.batch,
  count(*)                                               AS jobs,
  sum(j.state = 'queued')                                AS queued,
  sum(j.state = 'running')                               AS running,
  sum(j.state = 'done')                                  AS done,
  sum(j.state = 'failed')                                AS failed,
  sum(j.state = 'cancelled')                             AS cancelled,
  sum(j.state = 'dead')                                  AS dead,
  min(j.created_at)                                      AS created,
  CASE WHEN sum(j.state IN ('queued', 'running')) = 0 THEN max(j.finished_at) END AS finished,
  min(j.created_ms)                                      AS created_ms,
  CASE WHEN sum(j.state IN ('queued', 'running')) = 0 THEN max(j.finished_ms) END AS finished_ms,
  sum(r.prompt_tokens)                                   AS prompt_tokens,
  sum(r.completion_tokens)                               AS completion_tokens,
  -- decode_tok_s * decode_ms / 1000 is the tokens a job decoded (replayed checkpoint tokens excluded).
  round(coalesce(sum(r.decode_tok_s * r.decode_ms) / nullif(sum(r.decode_share_ms), 0),
                 sum(r.completion_tokens) * 1000.0 / nullif(sum(r.decode_ms), 0)), 2) AS decode_tok_s,
  round(sum(r.completion_tokens) * 1000.0 / nullif(sum(r.decode_ms), 0), 2) AS job_decode_tok_s,
  sum(r.load_ms)                                         AS load_ms,
  sum(j.state = 'queued' AND j.error_kind = 'daemon_config') AS held,
  max(CASE WHEN j.state = 'queued' AND j.error_kind = 'daemon_config' THEN j.error END) AS held_reason
FROM jobs AS j
LEFT JOIN results AS r ON r.job_id = j.id
WHERE j.batch IS NOT NULL
GROUP BY j.batch;
