# Issue #30 N2: releases that are no shutdown are not logged as one. 1. A job
# whose lease was taken over (its daemon stopped beyond lease_ms, another
# recovered it) is dropped by the stopped daemon once it runs again: its log
# says the lease was taken over, never "released back to the queue (shutting
# down)". 2. A job of 2 choices claimed while 1 batch slot is free goes back to
# the queue with that reason in the log (before: "(shutting down)").
source "$(dirname "$0")/lib.sh"

slow_model_config slow "lease_ms: 1000"
sed 's/^database: q.db$/database: q.db\nworker_id: daemon-a/' "$CONFIG" > "$WORK/a.yaml"
sed 's/^database: q.db$/database: q.db\nworker_id: daemon-b/' "$CONFIG" > "$WORK/b.yaml"

job=$(ns submit --config "$CONFIG" --model slow --max-tokens 3000 --ignore-eos --temperature 0 "A long story")
"$NIGHTSHIFTD" --config "$WORK/a.yaml" > "$WORK/daemon-a.log" 2>&1 &
a=$!
EXTRA_PIDS+=("$a")
runs_on() { [[ "$(sql "SELECT state || ':' || worker FROM jobs WHERE id = $job")" == "running:$1" ]]; }
wait_for 30 "daemon-a to run job $job" runs_on daemon-a
# Stopped between writes: a process stopped inside a SQLite write transaction holds its lock (others wait).
stop_a_unlocked() {
  kill -STOP "$a"
  "$SQLITE3" -cmd ".timeout 300" "$DB" "BEGIN IMMEDIATE; COMMIT;" > /dev/null 2>&1 && return 0
  kill -CONT "$a"
  return 1
}
wait_for 30 "daemon-a to be stopped outside a write" stop_a_unlocked
"$NIGHTSHIFTD" --config "$WORK/b.yaml" > "$WORK/daemon-b.log" 2>&1 &
b=$!
EXTRA_PIDS+=("$b")
wait_for 30 "daemon-b to take job $job over" runs_on daemon-b
kill -CONT "$a"
wait_for 30 "daemon-a to notice its lost lease" grep -q "job $job.*taken over\|job $job: attempt .* no longer holds" \
  "$WORK/daemon-a.log"
# daemon-a dropped the job; stopped first (it holds nothing), its log must not mention a shutdown's release.
kill -TERM "$a"
wait_pid "$a" 0
kill -TERM "$b"
wait_pid "$b" 0
[[ "$(cat "$WORK/daemon-a.log")" != *"released back to the queue"* ]] ||
  fail "daemon-a logged its lost job as released: $(grep released "$WORK/daemon-a.log")"

# 2. A drop release: max_batch 2, one long job running, then a job of 2 choices.
ns cancel --config "$CONFIG" "$job" > /dev/null  # part 1's job, queued again by daemon-b's stop
sed -i 's/^threads: 2$/threads: 2\nmax_batch: 2/' "$CONFIG"
long=$(ns submit --config "$CONFIG" --model slow --max-tokens 3000 --ignore-eos "Another long story")
: > "$WORK/daemon.log"
start_daemon
wait_for 30 "job $long to run" state_is "$long" running
two=$(ns submit --config "$CONFIG" --model slow --max-tokens 4 --ignore-eos --choices 2 "Two choices")
wait_for 30 "job $two to be released for want of slots" grep -q "job $two released back to the queue" \
  "$WORK/daemon.log"
expect_contains "$(grep "job $two released" "$WORK/daemon.log")" "batch slot(s)" "the release says why"
ns cancel --config "$CONFIG" "$long" > /dev/null
wait_for 60 "job $two to be done" state_is "$two" done
kill -TERM "$DAEMON_PID"
wait_daemon 0
[[ "$(cat "$WORK/daemon.log")" != *"shutting down"* ]] || fail "a drop release logged as a shutdown"
echo "ok"
