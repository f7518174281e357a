# status and watch with the real binaries, on a pipe (no terminal): counts,
# a running job's progress as the daemon reports it (tokens done/max, tok/s,
# ETA), the last finished jobs, batches and daemons; `watch --until-done`
# printing one plain line per refresh and returning once nothing is queued
# or running; `watch` stopping on Ctrl-C (SIGINT) with status 0.
source "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || { echo "SKIP: python3 is needed to check the JSON"; exit 77; }

# Big enough that a long job runs for seconds; heartbeats (and progress) every 200 ms.
make_model slow.gguf --n-embd 512 --n-layer 6 --n-ff 1024
write_config slow=slow.gguf
sed -i -e 's/^threads: 2/threads: 1/' "$CONFIG"
echo "lease_ms: 600" >> "$CONFIG"

expect_exit 1 ns status --config "$CONFIG"
expect_contains "$OUT" "does not exist" "status without a database"

short=$(ns submit --config "$CONFIG" --model slow --max-tokens 3 --ignore-eos "A short one")
printf '{"custom_id": "long", "method": "POST", "url": "/v1/completions", "body": {"prompt": "Once upon a time", "max_tokens": 1900, "ignore_eos": true}}\n' \
  > "$WORK/long.jsonl"
ns submit --config "$CONFIG" --model slow --jsonl "$WORK/long.jsonl" --priority -1 > /dev/null
long=$(sql "SELECT id FROM jobs WHERE custom_id = 'long'")

status=$(ns status --config "$CONFIG")
expect_contains "$status" "queue: 2 queued, 0 running, 0 done" "status before the daemon"
expect_contains "$status" "running: none" "nothing running yet"
expect_contains "$status" "daemons: none has registered" "no daemon yet"
expect_contains "$status" "long  0/1 finished" "the batch"
[[ "$status" != *$'\x1b'* ]] || fail "status wrote terminal codes to a pipe"

start_daemon
"$NIGHTSHIFT" watch --config "$CONFIG" --interval 0.2 --until-done > "$WORK/watch.out" 2> "$WORK/watch.err" &
watch_pid=$!
EXTRA_PIDS+=("$watch_pid")

# The long job's progress reaches the database and both commands show it.
progress_shown() { grep -qE "\| job $long [0-9]+/1900 tok, [0-9.]+ tok/s, ETA [0-9]" "$WORK/watch.out"; }
wait_for 30 "watch to show the long job's progress" progress_shown
status=$(ns status --config "$CONFIG")
expect_contains "$status" "queue: 0 queued, 1 running, 1 done" "status while running"
expect_contains "$status" "job $long  slow  long long  (" "the running job, with its batch and custom id"
[[ "$status" =~ [0-9]+/1900\ tok,\ [0-9.]+\ tok/s,\ ETA ]] || fail "status shows no progress: $status"
expect_contains "$status" "last finished:"$'\n'"  job $short  done" "the last finished job"
expect_contains "$status" "model slow  jobs $long" "the daemon and its job"
ns status --config "$CONFIG" --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert s["counts"]["running"] == 1, s["counts"]
r = s["running"][0]
assert r["custom_id"] == "long" and r["max_tokens"] == 1900 and 0 < r["generated"] < 1900, r
assert r["tok_s"] > 0 and r["eta_s"] > 0, r
assert s["workers"] and s["workers"][0]["stopped_ms"] is None, s["workers"]
' || fail "status --json"

# Cancel the long job: the queue empties and watch --until-done returns 0.
ns cancel --config "$CONFIG" "$long" > /dev/null
wait_pid "$watch_pid" 0 30
lines=$(wc -l < "$WORK/watch.out")
((lines >= 2)) || fail "watch printed $lines lines"
grep -qvE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z [0-9]+ queued' "$WORK/watch.out" && fail "watch lines are not plain: $(cat "$WORK/watch.out")"
! grep -q $'\x1b' "$WORK/watch.out" || fail "watch wrote terminal codes to a pipe"
expect_contains "$(tail -n 1 "$WORK/watch.out")" "0 queued, 0 running, 1 done, 0 failed, 1 cancelled" "watch's last line"

# Ctrl-C stops a plain watch with status 0.
"$NIGHTSHIFT" watch --config "$CONFIG" --interval 0.2 > "$WORK/watch2.out" &
watch_pid=$!
EXTRA_PIDS+=("$watch_pid")
wait_for 10 "watch to print" test -s "$WORK/watch2.out"
kill -INT "$watch_pid"
wait_pid "$watch_pid" 0 5

kill -TERM "$DAEMON_PID"
wait_daemon 0
status=$(ns status --config "$CONFIG" --batch long)
expect_contains "$status" "batch long: 0 queued, 0 running, 0 done, 0 failed, 1 cancelled" "status --batch"
expect_contains "$status" "  long  1/1 finished" "the finished batch"
[[ "$status" =~ stopped\ ([0-9]+s\ ago|just\ now) ]] || fail "the stopped daemon is not shown as stopped: $status"
# Idle: watch --until-done returns at once.
expect_exit 0 timeout 5 "$NIGHTSHIFT" watch --config "$CONFIG" --until-done
expect_exit 3 ns status --config "$CONFIG" --batch no-such-batch

# `nightshift run` on a terminal (script(1) gives it one): a loading line,
# the prefill line from 0, a live decode line on stderr while the text goes
# to a file, which gets the text alone.
if command -v script > /dev/null; then
  # The decode line shows after 0.5 s (run_progress.cpp): a model ~10x the daemon's, so 200 tokens take seconds
  # even on a fast, quiet machine (slow.gguf decoded 600 tokens in 0.4 s there).
  make_model tty.gguf --n-embd 1024 --n-layer 8 --n-ff 2816
  run_args=(--model "$WORK/tty.gguf" --threads 1 -n 200 --ignore-eos --temperature 0 "Once upon a time")
  tty_err=$(script -qec "$(printf '%q ' "$NIGHTSHIFT" run "${run_args[@]}") > $(printf '%q' "$WORK/run-tty.txt")" /dev/null |
            tr '\r' '\n')
  [[ "$tty_err" =~ decode\ \ \[#*-*\]\ [0-9]+/200\ tok,\ [0-9.]+\ tok/s ]] || fail "no decode progress on a terminal: $tty_err"
  # Not silent while the model loads and the first prompt chunk runs.
  expect_contains "$tty_err" "loading tty.gguf (" "run's loading line"
  [[ "$tty_err" =~ prefill\ \[-+\]\ 0/[0-9]+\ prompt\ tok ]] || fail "no prefill line before the first chunk: $tty_err"
  expect_contains "$tty_err" "[length] prompt" "the final timing line"
  plain_err=$("$NIGHTSHIFT" run "${run_args[@]}" 2>&1 > "$WORK/run-plain.txt")
  [[ "$plain_err" != *"decode  ["* && "$plain_err" != *$'\x1b'* ]] || fail "progress written to a pipe: $plain_err"
  cmp -s "$WORK/run-tty.txt" "$WORK/run-plain.txt" || fail "the progress line changed the generated text"
  [[ -s "$WORK/run-tty.txt" ]] || fail "run wrote no text"
else
  echo "script(1) is not installed: run's terminal progress was not checked"
fi
echo "ok"
