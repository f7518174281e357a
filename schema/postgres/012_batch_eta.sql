-- batch_eta: batch_summary gains `eta_s`, the seconds until the batch's last
-- job ends, the queued jobs included, and `load_ms` becomes whole milliseconds:
-- as SQLite's 014_batch_eta.sql (the formula is jobs/batch_eta.cpp's). No table
-- changes.
DROP VIEW batch_summary;
CREATE VIEW batch_summary AS
SELECT
  batch, jobs, queued, running, done, failed, cancelled, dead, created, finished, created_ms, finished_ms,
  prompt_tokens, completion_tokens, decode_tok_s, job_decode_tok_s, load_ms, held, held_reason,
  CASE
    WHEN e_queued + running = 0 OR first_started_ms IS NULL OR e_produced <= 0 OR e_active_s <= 0 THEN NULL
    ELSE round(
      (CASE WHEN e_queued > 0 THEN e_queued * least(coalesce(e_mean, 1e300), e_queued_max / e_queued) ELSE 0 END
       + greatest(CASE WHEN running > 0 THEN running * least(coalesce(e_mean, 1e300), e_running_max / running)
                       ELSE 0 END - e_running_generated, 0))
      / (e_produced / e_active_s))::bigint
  END AS eta_s
FROM (
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
    round(sum(r.load_ms))::bigint                           AS load_ms,
    count(*) FILTER (WHERE j.state = 'queued' AND j.error_kind = 'daemon_config') AS held,
    max(j.error) FILTER (WHERE j.state = 'queued' AND j.error_kind = 'daemon_config') AS held_reason,
    -- The ETA's sums (jobs/batch_eta.h's BatchProgress), as double precision.
    min(j.started_ms)                                       AS first_started_ms,
    (sum(r.completion_tokens) FILTER (WHERE j.state = 'done'))::double precision
      / nullif(count(*) FILTER (WHERE j.state = 'done'), 0) AS e_mean,
    count(*) FILTER (WHERE j.state = 'queued' AND j.error_kind IS DISTINCT FROM 'daemon_config') AS e_queued,
    coalesce(sum(j.max_tokens * j.n) FILTER (WHERE j.state = 'queued' AND j.error_kind IS DISTINCT FROM
                                                   'daemon_config'), 0)::double precision AS e_queued_max,
    coalesce(sum(j.max_tokens * j.n) FILTER (WHERE j.state = 'running'), 0)::double precision AS e_running_max,
    coalesce(sum(j.progress_generated) FILTER (WHERE j.state = 'running'), 0)::double precision
                                                            AS e_running_generated,
    (coalesce(sum(r.completion_tokens), 0)
       + coalesce(sum(j.progress_generated) FILTER (WHERE j.state = 'running'), 0))::double precision AS e_produced,
    (nightshift_now_ms() - min(j.started_ms) - coalesce(sum(r.load_ms), 0))::double precision / 1000.0
                                                            AS e_active_s
  FROM jobs AS j
  LEFT JOIN results AS r ON r.job_id = j.id
  WHERE j.batch IS NOT NULL
  GROUP BY j.batch
) AS s;
