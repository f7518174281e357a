-- batch_rates: what a batch really did, and how long a running job has left.
--
-- results.decode_share_ms: the job's share of the wall time of the steps that
-- decoded its tokens (each such step's time split evenly among the tokens it
-- decoded; engine GenerationStats::decode_share_ms). Jobs decoded together
-- each see the whole step in decode_ms, so sum(decode_ms) over a batch counts
-- one second once per job in it: the old batch_summary.decode_tok_s was the
-- per-job rate (23.5 where the batch ran at 85-102 tok/s). The shares of the
-- jobs of a step sum to the step's time, so decoded tokens / sum(shares) is
-- the batch's rate. 0 for results written before this migration.
ALTER TABLE results ADD COLUMN decode_share_ms REAL NOT NULL DEFAULT 0;

-- jobs.progress_eta_s: the daemon's estimate, when it wrote the progress
-- (progress_ms), of the seconds the job has left until max_tokens, from its
-- batch's measured step rate; readers count it down from progress_ms. NULL
-- when unknown (no step measured yet).
ALTER TABLE jobs ADD COLUMN progress_eta_s REAL;

-- batch_summary: decode_tok_s becomes the batch's rate (decoded tokens over
-- the wall time the batch was decoding); the per-job figure stays, named
-- job_decode_tok_s; load_ms sums the model loads the batch paid (each load is
-- charged to one job: the first of those claimed with it). Batches whose
-- results predate the migration fall back to the per-job figure.
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
  sum(r.load_ms)                                         AS load_ms
FROM jobs AS j
LEFT JOIN results AS r ON r.job_id = j.id
WHERE j.batch IS NOT NULL
GROUP BY j.batch;
