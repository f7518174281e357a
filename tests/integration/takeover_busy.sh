# A killed daemon's job is taken over by a daemon that is busy with a batch of
# its own, once the lease expires (not when the survivor's batch runs dry:
# measured before, 21.8 s under a 5 s lease), and it resumes there.
source "$(dirname "$0")/lib.sh"

slow_model_config busy "lease_ms: 1000" "max_batch: 4" "context: 4096"
# daemon-a runs one job at a time, so the long job below is left to daemon-b.
sed 's/^database: q.db$/database: q.db\nworker_id: daemon-a/; s/^max_batch: 4$/max_batch: 1/' "$CONFIG" > "$WORK/a.yaml"
sed 's/^database: q.db$/database: q.db\nworker_id: daemon-b/' "$CONFIG" > "$WORK/b.yaml"

orphan=$(ns submit --config "$CONFIG" --model busy --max-tokens 400 --ignore-eos --temperature 0 "The orphan's story")
"$NIGHTSHIFTD" --config "$WORK/a.yaml" > "$WORK/daemon-a.log" 2>&1 &
a=$!
EXTRA_PIDS+=("$a")
checkpointed() { (($(sql "SELECT ifnull((SELECT token_count FROM checkpoints WHERE job_id = $orphan), 0)") >= 32)); }
wait_for 20 "daemon-a to checkpoint job $orphan" checkpointed

# daemon-b is busy with a long job of its own when daemon-a dies.
long=$(ns submit --config "$CONFIG" --model busy --max-tokens 4000 --ignore-eos "A very long chronicle")
"$NIGHTSHIFTD" --config "$WORK/b.yaml" > "$WORK/daemon-b.log" 2>&1 &
b=$!
EXTRA_PIDS+=("$b")
long_running() { [[ "$(sql "SELECT state || worker FROM jobs WHERE id = $long")" == "runningdaemon-b" ]]; }
wait_for 20 "daemon-b to run job $long" long_running
killed_at=$(now_ms)
{ kill -KILL "$a" && wait "$a"; } 2> /dev/null || true

left_a() { [[ "$(sql "SELECT worker IS NULL OR worker <> 'daemon-a' FROM jobs WHERE id = $orphan")" == 1 ]]; }
wait_for 20 "job $orphan to be taken back from daemon-a" left_a
took=$(($(now_ms) - killed_at))
expect_eq "$(job_state "$long")" "running" "daemon-b's own job while it took job $orphan back (it was busy)"
echo "take-over by a busy daemon: $took ms after kill -9 (lease_ms 1000)"

ns cancel --config "$CONFIG" "$long" > /dev/null
wait_for 30 "job $orphan to finish on daemon-b" state_is "$orphan" done
kill -TERM "$b"
wait_pid "$b" 0
expect_eq "$(sql "SELECT group_concat(worker || ':' || outcome, ' ') FROM (SELECT worker, outcome FROM attempts
                  WHERE job_id = $orphan ORDER BY attempt)")" "daemon-a:lease_expired daemon-b:done" "attempt history"
expect_eq "$(sql "SELECT resumed_tokens >= 32 FROM attempts WHERE job_id = $orphan AND worker = 'daemon-b'")" 1 \
  "resumed from daemon-a's checkpoint"
echo "ok"
