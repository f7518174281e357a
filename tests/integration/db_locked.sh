# The database locked by another writer (a sqlite3 shell left inside BEGIN
# IMMEDIATE): `nightshift submit` gives up after the busy timeout with exit 1
# and says why; reads still work; the daemon keeps retrying with backoff
# instead of exiting, and once the lock is gone every job finishes once.
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
write_config tiny=tiny.gguf
echo "busy_timeout_ms: 100" >> "$CONFIG"
for i in 1 2 3 4 5 6; do echo "Locked night number $i"; done > "$WORK/prompts.txt"
ns submit --config "$CONFIG" --model tiny --max-tokens 4 --ignore-eos --prompt-lines "$WORK/prompts.txt" > /dev/null

mkfifo "$WORK/lock.fifo"
# The other writer says so once it holds the lock (.bail: a failed BEGIN
# ends the shell instead of leaving the test to guess).
"$SQLITE3" -bail -cmd ".timeout 10000" "$DB" < "$WORK/lock.fifo" > "$WORK/locker.out" 2>&1 &
locker=$!
EXTRA_PIDS+=("$locker")
exec 3> "$WORK/lock.fifo"
echo "BEGIN IMMEDIATE;" >&3
echo "SELECT 'holding the lock';" >&3
locked() { grep -q "holding the lock" "$WORK/locker.out"; }
wait_for 15 "the other writer to hold the lock" locked

start_daemon 3>&-  # the daemon must not keep the lock fifo open
expect_exit 1 ns submit --config "$CONFIG" --model tiny "while locked"
expect_contains "$OUT" "database is locked" "submit under the lock"
expect_contains "$OUT" "longer than the busy timeout (100 ms)" "the hint names the timeout"
expect_exit 0 ns list --config "$CONFIG"  # WAL: readers are not blocked
expect_contains "$OUT" "queued 6, running 0" "list under the lock"
# It registers in the workers table first (one transaction with its id check), so that is where it waits.
wait_for 10 "the daemon to meet the lock" grep -qE "cannot (start on the database|claim a job) yet: database .* is locked" \
  "$WORK/daemon.log"
sleep 1
kill -0 "$DAEMON_PID" || fail "the daemon exited while the database was locked"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'queued'")" 6 "nothing ran under the lock"

echo "COMMIT;" >&3
exec 3>&-
wait "$locker" || true
all_done() { [[ "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" == 6 ]]; }
wait_for 10 "the jobs to finish once the lock is gone" all_done
kill -TERM "$DAEMON_PID"
wait_daemon 0
expect_eq "$(sql "SELECT count(*) FROM attempts")" 6 "one attempt per job"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE attempts = 1")" 6 "no job claimed twice"
retries=$(grep -cE "cannot (start on the database|claim a job) yet" "$WORK/daemon.log")
echo "the daemon retried $retries times while the database was locked"
echo "ok"
