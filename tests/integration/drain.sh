# nightshiftd --drain as a night run uses it: after a clean exit its workers
# row says stopped (a last heartbeat tick used to clear the mark, so `status`
# called a healthy run "crashed or hung?").
source "$(dirname "$0")/lib.sh"

# A 128 MB model: unmapping it at exit widens the window in which a late
# heartbeat tick undid the stopped mark (before the fix: 3 runs of 3 failed
# within 5 rounds; a 1 MB model hit it rarely).
make_model tiny.gguf --n-embd 512 --n-layer 8 --n-ff 2048 --type F32
write_config tiny=tiny.gguf
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
echo "ok"
