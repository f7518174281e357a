# Two nightshiftd under one worker_id: the second refuses to start (exit 2),
# naming the first, and the first's running job is untouched (before, the
# second marked it abandoned and both ran under one name). After the first
# exits, the id is free again.
source "$(dirname "$0")/lib.sh"

slow_model_config tiny "worker_id: night" "context: 4096"
job=$(ns submit --config "$CONFIG" --model tiny --max-tokens 4000 --ignore-eos "A long night")
start_daemon
first=$DAEMON_PID
checkpointed() { (($(sql "SELECT ifnull((SELECT token_count FROM checkpoints WHERE job_id = $job), 0)") >= 16)); }
wait_for 20 "job $job to run" checkpointed

expect_exit 2 "$NIGHTSHIFTD" --config "$CONFIG"
expect_contains "$OUT" "worker_id 'night' is in use by a running nightshiftd (pid $first on host" "refusal names the other"
expect_contains "$OUT" "Give this daemon a worker_id of its own in $CONFIG" "refusal names the fix"
expect_eq "$(sql "SELECT state || ':' || attempt || ':' || worker FROM jobs WHERE id = $job")" "running:1:night" \
  "the first daemon's job is untouched"
expect_eq "$(sql "SELECT count(*) FROM attempts WHERE outcome = 'abandoned'")" 0 "nothing marked abandoned"

ns cancel --config "$CONFIG" "$job" > /dev/null
wait_for 20 "job $job to be cancelled" state_is "$job" cancelled
kill -TERM "$first"
wait_daemon 0
# The id is free once its daemon has gone.
ns submit --config "$CONFIG" --model tiny --max-tokens 4 "After" > /dev/null
expect_exit 0 "$NIGHTSHIFTD" --config "$CONFIG" --drain
echo "ok"
