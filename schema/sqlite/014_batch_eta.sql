-- batch_eta: batch_summary gains `eta_s`, the seconds until the batch's last
-- job ends, the queued jobs included: what is left (each queued job's expected
-- output, the mean completion of the batch's done jobs capped at its max_tokens
-- x n, and the running jobs' rest) at the rate the batch has gone (output tokens
-- per second since its first job started, its model loads left out). The same
-- formula as jobs/batch_eta.cpp (`nightshift status` computes it there; the
-- unit test batch_eta_view_test holds the two together). NULL when nothing is
-- left to run or nothing was produced yet; held jobs are left out. `load_ms` is
-- now whole milliseconds (it showed sums such as 1234.5678901). No table changes.
DROP VIEW batch_summary;
CREATE VIEW batch_summary AS
SELECT
  batch, jobs, queued, running, done, failed, cancelled, dead, created, finished, created_ms, finished_ms,
  prompt_tokens, completion_tokens, decode_tok_s, job_decode_tok_s, load_ms, held, held_reason,
  CASE
    WHEN e_queued + running = 0 OR first_started_ms IS NULL OR e_produced <= 0 OR e_active_s <= 0 THEN NULL
    ELSE CAST(round(
      (CASE WHEN e_queued > 0 THEN e_queued * min(coalesce(e_mean, 1e300), e_queued_max * 1.0 / e_queued) ELSE 0 END
       + max(CASE WHEN running > 0 THEN running * min(coalesce(e_mean, 1e300), e_running_max * 1.0 / running)
                  ELSE 0 END - e_running_generated, 0))
      / (e_produced / e_active_s)) AS INTEGER)
  END AS eta_s
FROM (
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
    CAST(round(sum(r.load_ms)) AS INTEGER)                 AS load_ms,
    sum(j.state = 'queued' AND j.error_kind = 'daemon_config') AS held,
    max(CASE WHEN j.state = 'queued' AND j.error_kind = 'daemon_config' THEN j.error END) AS held_reason,
    -- The ETA's sums (jobs/batch_eta.h's BatchProgress).
    min(j.started_ms)                                      AS first_started_ms,
    sum(CASE WHEN j.state = 'done' THEN r.completion_tokens END) * 1.0
      / nullif(sum(j.state = 'done'), 0)                   AS e_mean,
    sum(j.state = 'queued' AND j.error_kind IS NOT 'daemon_config') AS e_queued,
    coalesce(sum(CASE WHEN j.state = 'queued' AND j.error_kind IS NOT 'daemon_config' THEN j.max_tokens * j.n END), 0)
                                                           AS e_queued_max,
    coalesce(sum(CASE WHEN j.state = 'running' THEN j.max_tokens * j.n END), 0) AS e_running_max,
    coalesce(sum(CASE WHEN j.state = 'running' THEN j.progress_generated END), 0) AS e_running_generated,
    coalesce(sum(r.completion_tokens), 0)
      + coalesce(sum(CASE WHEN j.state = 'running' THEN j.progress_generated END), 0) AS e_produced,
    ((julianday('now') - 2440587.5) * 86400000.0 - min(j.started_ms) - coalesce(sum(r.load_ms), 0)) / 1000.0
                                                           AS e_active_s
  FROM jobs AS j
  LEFT JOIN results AS r ON r.job_id = j.id
  WHERE j.batch IS NOT NULL
  GROUP BY j.batch
);
