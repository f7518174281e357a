# Load: 10,000 jobs submitted by 4 concurrent `nightshift submit` processes
# while nightshiftd claims and runs them. None is lost, none is duplicated,
# and the submit throughput is measured (target: under 5 s for 10,000, with
# the durable default synchronous = full).
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
write_config tiny=tiny.gguf
expect_exit 0 ns submit --config "$CONFIG" --model tiny --max-tokens 1 "warm-up"  # creates the database

for p in 1 2 3 4; do
  for i in $(seq 1 2500); do echo "load test prompt $p.$i"; done > "$WORK/prompts-$p.txt"
done

start_daemon
t0=$(now_ms)
pids=()
for p in 1 2 3 4; do
  ns submit --config "$CONFIG" --model tiny --max-tokens 1 --key "load-$p" --prompt-lines "$WORK/prompts-$p.txt" \
    > "$WORK/ids-$p.txt" 2> "$WORK/submit-$p.err" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait_pid "$pid" 0 60; done
submit_ms=$(($(now_ms) - t0))
kill -TERM "$DAEMON_PID"
wait_daemon 0

claimed=$(sql "SELECT count(*) FROM jobs WHERE attempts > 0 OR state <> 'queued'")
echo "load: 10000 jobs submitted by 4 processes in $submit_ms ms ($((10000 * 1000 / (submit_ms > 0 ? submit_ms : 1))) jobs/s); the daemon claimed $claimed meanwhile"
((submit_ms < 5000)) || fail "submitting 10,000 jobs took $submit_ms ms (target < 5000)"

expect_eq "$(cat "$WORK"/ids-*.txt | wc -l)" 10000 "ids printed"
expect_eq "$(cat "$WORK"/ids-*.txt | sort -u | wc -l)" 10000 "distinct ids printed"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE idempotency_key LIKE 'load-%'")" 10000 "rows in the database"
expect_eq "$(sql "SELECT count(DISTINCT idempotency_key) FROM jobs WHERE idempotency_key LIKE 'load-%'")" 10000 "distinct keys"
cat "$WORK"/ids-*.txt | sort -n > "$WORK/printed.txt"
sql "SELECT id FROM jobs WHERE idempotency_key LIKE 'load-%' ORDER BY id" > "$WORK/stored.txt"
cmp -s "$WORK/printed.txt" "$WORK/stored.txt" || fail "the ids printed and the ids stored differ"
# Every line of every file is one job with that prompt.
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE prompt = 'load test prompt ' || substr(idempotency_key, 6, 1) || '.' ||
                  substr(idempotency_key, 8)")" 10000 "each job holds its own line"
# Nothing ran twice: one attempt row per claim, one result per finished job.
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE attempts > 1")" 0 "jobs claimed twice"
expect_eq "$(sql "SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.idempotency_key LIKE 'load-%'")" \
  "$(sql "SELECT count(*) FROM jobs WHERE attempt > 0 AND idempotency_key LIKE 'load-%'")" "attempt rows"
expect_eq "$(sql "SELECT count(*) FROM results")" "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" "results"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state NOT IN ('queued', 'done')")" 0 "states"

# Submitting the same files again queues nothing (the keys match).
ns submit --config "$CONFIG" --model tiny --max-tokens 1 --key "load-1" --prompt-lines "$WORK/prompts-1.txt" \
  > "$WORK/again.txt" 2> /dev/null
cmp -s "$WORK/again.txt" "$WORK/ids-1.txt" || fail "a repeated submit returned other ids"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 10001 "no duplicates from a repeated submit"
echo "ok"
