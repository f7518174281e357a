# SIGTERM in the middle of a generation: the job goes back to `queued`
# (attempt not counted, no result) and nightshiftd exits 0; the next daemon
# runs it from the start.
source "$(dirname "$0")/lib.sh"

# Big enough that 3000 tokens take far longer than this test waits.
make_model slow.gguf --n-embd 256 --n-layer 4 --n-ff 768 --n-ctx 4096
write_config slow=slow.gguf
echo "context: 4096" >> "$CONFIG"

long=$(ns submit --config "$CONFIG" --model slow --max-tokens 3000 --ignore-eos "A long story")
short=$(ns submit --config "$CONFIG" --model slow --max-tokens 3 --ignore-eos --priority -1 "A short one")

start_daemon
wait_for 20 "job $long to start" state_is "$long" running
sleep 0.5  # well into the decode
state_is "$long" running || fail "the long job ended before SIGTERM; make the model slower"
kill -TERM "$DAEMON_PID"
wait_daemon 0

expect_eq "$(job_state "$long")" "queued" "interrupted job state"
expect_eq "$(sql "SELECT attempts || ',' || ifnull(worker, 'null') || ',' || ifnull(started_ms, 'null') FROM jobs WHERE id = $long")" \
  "0,null,null" "interrupted job attempts/worker/started"
expect_eq "$(sql "SELECT count(*) FROM results WHERE job_id = $long")" 0 "no partial result stored"
expect_eq "$(job_state "$short")" "queued" "the next job was not started"
expect_contains "$(cat "$WORK/daemon.log")" "job $long released back to the queue" "release logged"
expect_contains "$(cat "$WORK/daemon.log")" "stopping on SIGTERM" "shutdown logged"

# The long job keeps its place: a new daemon claims it first.
start_daemon
wait_for 20 "job $long to run again" state_is "$long" running
expect_eq "$(sql "SELECT attempts FROM jobs WHERE id = $long")" 1 "attempts after the restart"
kill -INT "$DAEMON_PID"
wait_daemon 0
expect_eq "$(job_state "$long")" "queued" "released again on SIGINT"
echo "ok"
