# nightshiftd --drain as a night run uses it: after a clean exit its workers
# row says stopped (a last heartbeat tick used to clear the mark, so `status`
# called a healthy run "crashed or hung?").
source "$(dirname "$0")/lib.sh"

# A 128 MB model: unmapping it at exit widens the window in which a late
# heartbeat tick undid the stopped mark (before the fix: 3 runs of 3 failed
# within 5 rounds; a 1 MB model hit it rarely).
make_model tiny.gguf --n-embd 512 --n-layer 8 --n-ff 2048 --type F32
make_model slow.gguf --n-embd 256 --n-layer 8 --n-ff 768 --n-ctx 4096  # as kill9_resume.sh
write_config tiny=tiny.gguf slow=slow.gguf
echo "worker_id: night-run" >> "$CONFIG"

# Several rounds: the late tick raced the exit, so one round could pass by luck.
for round in $(seq 10); do
  id=$(ns submit --config "$CONFIG" --model tiny --max-tokens 2 --ignore-eos "round $round")
  start_daemon --drain
  wait_daemon 0
  expect_eq "$(job_state "$id")" done "job of round $round"
  expect_eq "$(sql "SELECT stopped_ms IS NOT NULL AND stopped_ms >= heartbeat_ms FROM workers WHERE id = 'night-run'")" 1 \
    "round $round: the workers row is marked stopped after --drain exits"
done
status=$(ns status --config "$CONFIG")
[[ "$status" == *"crashed or hung"* ]] && fail "status calls a cleanly drained daemon crashed: $status"
[[ "$status" =~ stopped\ ([0-9]+s\ ago|just\ now) ]] || fail "status does not show the drained daemon stopped: $status"

# A daemon killed mid-job leaves the job `running` under a lease nobody
# renews: a --drain daemon started then must not exit 0 with that work left.
# It waits for the lease to expire, takes the job over, finishes it, then exits.
{
  echo "context: 1024"
  echo "lease_ms: 2000"
  echo "checkpoint_tokens: 8"
  echo "checkpoint_interval_ms: 0"
} >> "$CONFIG"
sed 's/^worker_id: night-run$/worker_id: killed/' "$CONFIG" > "$WORK/killed.yaml"
job=$(ns submit --config "$CONFIG" --model slow --max-tokens 400 --ignore-eos "a long job")
"$NIGHTSHIFTD" --config "$WORK/killed.yaml" > "$WORK/killed.log" 2>&1 &
killed=$!
EXTRA_PIDS+=("$killed")
checkpointed() { (($(sql "SELECT ifnull((SELECT token_count FROM checkpoints WHERE job_id = $job), 0)") >= 8)); }
wait_for 30 "job $job to checkpoint" checkpointed
{ kill -KILL "$killed" && wait "$killed"; } 2> /dev/null || true
expect_eq "$(job_state "$job")" running "the killed daemon's job, right after kill -9"
start_daemon --drain
wait_daemon 0
expect_eq "$(sql "SELECT state || ',' || worker FROM jobs WHERE id = $job")" "done,night-run" \
  "--drain took the killed daemon's job over and finished it before exiting"
expect_contains "$(cat "$WORK/daemon.log")" "drain: 1 job(s) running under another worker; waiting" "the wait is logged"
echo "ok"
