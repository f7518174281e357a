# kill_and_resume NAME GENERATOR-ARGS...: the kill -9 resume case of
# kill9_resume.sh and kill9_resume_families.sh, on one generated model. The
# job has two choices and logprobs: daemon-a is killed with kill -9 once the
# job has checkpointed 64 tokens, daemon-b (another worker id) takes it over
# when the lease expires and resumes from the checkpoint; the resumed job's
# text, choices and logprobs equal an uninterrupted run's, the attempt history
# and the logs say what happened, and the database stays consistent.
# Sourced after lib.sh.

# Each case has its own database and model name.
kill_and_resume() {
  local name=$1
  shift
  make_model "$name.gguf" "$@"
  rm -f "$DB" "$DB-wal" "$DB-shm"
  write_config slow="$name.gguf"
  {
    echo "context: 1024"
    echo "lease_ms: 1000"
    echo "checkpoint_tokens: 16"
    echo "checkpoint_interval_ms: 0"
  } >> "$CONFIG"
  sed 's/^database: q.db$/database: q.db\nworker_id: daemon-a/' "$CONFIG" > "$WORK/a.yaml"
  sed 's/^database: q.db$/database: q.db\nworker_id: daemon-b/' "$CONFIG" > "$WORK/b.yaml"

  prompt="The lighthouse keeper wrote in his log that night"
  local out=(--choices 2 --logprobs --top-logprobs 3)
  job=$(ns submit --config "$CONFIG" --model slow --max-tokens 400 --ignore-eos --temperature 0 --priority 1 "${out[@]}" "$prompt")

  "$NIGHTSHIFTD" --config "$WORK/a.yaml" > "$WORK/daemon-a.log" 2>&1 &
  a=$!
  EXTRA_PIDS+=("$a")
  checkpointed() { (($(sql "SELECT ifnull((SELECT token_count FROM checkpoints WHERE job_id = $job), 0)") >= 64)); }
  wait_for 20 "job $job to checkpoint 64 tokens" checkpointed
  killed_at=$(now_ms)
  { kill -KILL "$a" && wait "$a"; } 2> /dev/null || true  # (quietly: bash would report the kill)
  at_kill=$(sql "SELECT token_count FROM checkpoints WHERE job_id = $job")
  expect_eq "$(job_state "$job")" "running" "state right after kill -9"
  ((at_kill < 400)) || fail "the job finished before the kill"
  echo "daemon-a killed with $at_kill tokens checkpointed"

  "$NIGHTSHIFTD" --config "$WORK/b.yaml" > "$WORK/daemon-b.log" 2>&1 &
  b=$!
  EXTRA_PIDS+=("$b")
  taken_over() { [[ "$(sql "SELECT worker FROM jobs WHERE id = $job")" == "daemon-b" ]]; }
  wait_for 10 "daemon-b to take job $job over" taken_over
  echo "take-over: $(($(now_ms) - killed_at)) ms after kill -9 (lease_ms 1000)"
  # The same job again, run start to finish by daemon-b: the reference.
  reference=$(ns submit --config "$CONFIG" --model slow --max-tokens 400 --ignore-eos --temperature 0 "${out[@]}" "$prompt")
  wait_for 30 "both jobs to finish" bash -c "[[ \$('$SQLITE3' '$DB' \"SELECT count(*) FROM jobs WHERE state = 'done'\") == 2 ]]"
  kill -TERM "$b"
  wait_pid "$b" 0

  expect_eq "$(sql "SELECT completion_tokens FROM results WHERE job_id = $job")" 800 "completion tokens of the resumed job (2 choices)"
  expect_eq "$(sql "SELECT (SELECT text FROM results WHERE job_id = $job) = (SELECT text FROM results WHERE job_id = $reference)")" \
    1 "the resumed job's text equals an uninterrupted run's"
  expect_eq "$(sql "SELECT (SELECT choices FROM results WHERE job_id = $job) = (SELECT choices FROM results WHERE job_id = $reference)")" \
    1 "the resumed job's second choice equals an uninterrupted run's"
  expect_eq "$(sql "SELECT (SELECT logprobs FROM results WHERE job_id = $job) = (SELECT logprobs FROM results WHERE job_id = $reference)
                    AND length((SELECT logprobs FROM results WHERE job_id = $job)) > 20000")" \
    1 "the resumed job's logprobs equal an uninterrupted run's"
  expect_eq "$(sql "SELECT length(text) > 0 FROM results WHERE job_id = $job")" 1 "text is not empty"
  expect_eq "$(sql "SELECT group_concat(s, ' ') FROM (SELECT attempt || ':' || worker || ':' || outcome || ':' ||
                    resumed_tokens AS s FROM attempts WHERE job_id = $job ORDER BY attempt)")" \
    "1:daemon-a:lease_expired:0 2:daemon-b:done:$at_kill" "attempt history"
  expect_eq "$(sql "SELECT attempts || ',' || attempt FROM jobs WHERE id = $job")" "2,2" "attempts counted"
  expect_eq "$(sql "SELECT count(*) FROM checkpoints")" 0 "no checkpoint left behind"
  expect_contains "$(cat "$WORK/daemon-b.log")" "job $job running: model slow, priority 1, attempt 2 (2 of at most 3), " \
    "take-over logged"
  expect_contains "$(cat "$WORK/daemon-b.log")" "resuming from $((2 * at_kill)) checkpointed tokens" "resume logged (both choices)"
  expect_eq "$(sql "PRAGMA integrity_check")" "ok" "database integrity after kill -9"
  echo "$name: ok"
}
