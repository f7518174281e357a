# SIGTERM in the middle of a generation: the job is checkpointed and goes
# back to `queued` (attempt not counted, no result), nightshiftd exits 0 within
# a bounded time, and the next daemon resumes the job from the checkpoint.
# A drain that cannot finish (here: the database is locked by another
# writer) still ends within drain_timeout_ms; the job is then recovered once
# its lease expires.
source "$(dirname "$0")/lib.sh"

# Big enough that 3000 tokens take far longer than this test waits (tens of
# seconds on two cores: the engine does ~500 tok/s on a 256-wide 4-layer model).
make_model slow.gguf --n-embd 512 --n-layer 8 --n-ff 1536 --n-ctx 4096
write_config slow=slow.gguf
echo "max_batch: 1" >> "$CONFIG"  # the short job must wait, not join the long one
{
  echo "context: 4096"
  echo "checkpoint_tokens: 50"
  echo "worker_id: night-1"
} >> "$CONFIG"

long=$(ns submit --config "$CONFIG" --model slow --max-tokens 3000 --ignore-eos --temperature 0 "A long story")
short=$(ns submit --config "$CONFIG" --model slow --max-tokens 3 --ignore-eos --priority -1 "A short one")

start_daemon
wait_for 20 "job $long to start" state_is "$long" running
# Well into the decode: wait for its first checkpoint (state, not time: a model load
# under load took longer than the 0.5 s this once slept).
checkpointed() { (($(sql "SELECT ifnull((SELECT token_count FROM checkpoints WHERE job_id = $long), 0)") >= 50)); }
wait_for 30 "job $long to checkpoint 50 tokens" checkpointed
state_is "$long" running || fail "the long job ended before SIGTERM; make the model slower"
t0=$(now_ms)
kill -TERM "$DAEMON_PID"
wait_daemon 0
drain_ms=$(($(now_ms) - t0))
echo "drain: SIGTERM -> exit 0 in $drain_ms ms"
# Released at its next token, not after drain_timeout_ms (30 s by default); the bound leaves room for a loaded machine.
((drain_ms < 10000)) || fail "the drain took $drain_ms ms"

expect_eq "$(job_state "$long")" "queued" "interrupted job state"
expect_eq "$(sql "SELECT attempts || ',' || ifnull(worker, 'null') || ',' || ifnull(started_ms, 'null') FROM jobs WHERE id = $long")" \
  "0,null,null" "interrupted job attempts/worker/started"
expect_eq "$(sql "SELECT count(*) FROM results WHERE job_id = $long")" 0 "no partial result stored"
saved=$(sql "SELECT token_count FROM checkpoints WHERE job_id = $long")
((saved > 0)) || fail "no checkpoint saved at the stop"
expect_eq "$(sql "SELECT outcome FROM attempts WHERE job_id = $long")" "released" "attempt outcome"
expect_eq "$(job_state "$short")" "queued" "the next job was not started"
expect_contains "$(cat "$WORK/daemon.log")" "job $long released back to the queue (shutting down) with $saved tokens checkpointed" \
  "release logged"
expect_contains "$(cat "$WORK/daemon.log")" "stopping on SIGTERM" "shutdown logged"

# The long job keeps its place: a new daemon claims it first and resumes it.
start_daemon
wait_for 20 "job $long to run again" state_is "$long" running
expect_eq "$(sql "SELECT attempts FROM jobs WHERE id = $long")" 1 "attempts after the restart"
expect_eq "$(sql "SELECT resumed_tokens FROM attempts WHERE job_id = $long AND attempt = 2")" "$saved" "resumed tokens"
wait_for 10 "the resume to be logged" grep -q "job $long running: .*resuming from $saved checkpointed tokens" "$WORK/daemon.log"
grown() { (($(sql "SELECT token_count FROM checkpoints WHERE job_id = $long") > saved)); }
wait_for 20 "the resumed job to checkpoint new tokens" grown
kill -INT "$DAEMON_PID"
wait_daemon 0
expect_eq "$(job_state "$long")" "queued" "released again on SIGINT"
again=$(sql "SELECT token_count FROM checkpoints WHERE job_id = $long")
((again > saved)) || fail "the second attempt did not add to the checkpoint ($again <= $saved)"

# A drain that cannot write (another process holds the write lock) still ends
# within drain_timeout_ms, exit 0; the job stays running under its lease, and the restarted worker (same worker_id) takes it back at once.
{
  echo "drain_timeout_ms: 500"
  echo "busy_timeout_ms: 100"
  echo "lease_ms: 6000"  # longer than a loaded machine takes to restart: the same worker_id takes it back, not lease expiry
} >> "$CONFIG"
start_daemon
wait_for 20 "job $long to run a third time" state_is "$long" running
third() { (($(sql "SELECT ifnull((SELECT token_count FROM checkpoints WHERE job_id = $long AND attempt = 3), 0)") > again)); }
wait_for 30 "the third attempt to checkpoint new tokens" third
mkfifo "$WORK/lock.fifo"
# The other writer waits its turn for the lock (the daemon writes often), and
# says so only once it holds it (.bail: a failed BEGIN ends the shell instead).
"$SQLITE3" -bail -cmd ".timeout 10000" "$DB" < "$WORK/lock.fifo" > "$WORK/locker.out" 2>&1 &
EXTRA_PIDS+=($!)
locker=$!
exec 3> "$WORK/lock.fifo"
echo "BEGIN IMMEDIATE;" >&3
echo "SELECT 'holding the lock';" >&3
locked() { grep -q "holding the lock" "$WORK/locker.out"; }
wait_for 5 "the other writer to hold the lock" locked
t0=$(now_ms)
kill -TERM "$DAEMON_PID"
wait_daemon 0
bounded_ms=$(($(now_ms) - t0))
echo "drain against a locked database: SIGTERM -> exit 0 in $bounded_ms ms (drain_timeout_ms 500)"
# At least the deadline, and it does end (the other writer would hold the lock for 10 s); room for a loaded machine.
((bounded_ms >= 450 && bounded_ms < 8000)) || fail "the bounded drain took $bounded_ms ms"
expect_contains "$(cat "$WORK/daemon.log")" "the drain did not finish within drain_timeout_ms (500 ms)" "deadline logged"
echo "COMMIT;" >&3
exec 3>&-
wait "$locker" || true
expect_eq "$(job_state "$long")" "running" "the job was not released (its lease runs out instead)"

start_daemon
wait_for 10 "the job to be taken back and resumed" \
  grep -q "job $long running: .*resuming from" "$WORK/daemon.log"
expect_eq "$(sql "SELECT outcome FROM attempts WHERE job_id = $long AND attempt = 3")" "abandoned" \
  "the restarted worker (same worker_id) took its own job back at once"
kill -TERM "$DAEMON_PID"
wait_daemon 0
echo "ok"
