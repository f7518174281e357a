# Two daemons on one SQLite file, one with its wall clock an hour ahead
# (libfaketime; docs/fleet.md, finding 2). Before the fix the fast-clocked
# daemon saw the other's healthy lease as expired, took the job over and
# charged it an attempt; a job it requeued waited out a backoff stamped an
# hour ahead. Now a lease is taken over only once watched unrenewed for
# lease_ms on the steady clock, and a retry backoff ending further ahead than
# retry_backoff_max_ms (plus a minute) is claimable at once. Skipped (exit 77)
# without libfaketime (apt-get install faketime).
source "$(dirname "$0")/lib.sh"
FAKETIME_LIB=""
for f in /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 /usr/lib/*/faketime/libfaketimeMT.so.1; do
  [[ -f "$f" ]] && { FAKETIME_LIB=$f; break; }
done
[[ -n "$FAKETIME_LIB" ]] || { echo "skipped: libfaketime not found (apt-get install faketime)"; exit 77; }

slow_model_config slow "lease_ms: 3000"
sed 's/^database: q.db$/database: q.db\nworker_id: true-clock/' "$CONFIG" > "$WORK/a.yaml"
sed 's/^database: q.db$/database: q.db\nworker_id: hour-ahead/' "$CONFIG" > "$WORK/b.yaml"

"$NIGHTSHIFTD" --config "$WORK/a.yaml" > "$WORK/daemon-a.log" 2>&1 &
a=$!
EXTRA_PIDS+=("$a")
job=$(ns submit --config "$CONFIG" --model slow --max-tokens 3000 --ignore-eos --temperature 0 "A long story")
wait_for 30 "job $job to run under the true clock" state_is "$job" running
# Only the wall clock is ahead (steady_clock stays true, as on a real machine).
LD_PRELOAD="$FAKETIME_LIB" FAKETIME="+1h" FAKETIME_DONT_FAKE_MONOTONIC=1 \
  "$NIGHTSHIFTD" --config "$WORK/b.yaml" > "$WORK/daemon-b.log" 2>&1 &
b=$!
EXTRA_PIDS+=("$b")
told() { grep -q "job $job: the lease of worker true-clock looked expired by this machine's clock" "$WORK/daemon-b.log"; }
wait_for 30 "the hour-ahead daemon to see the lease renewed" told
expect_eq "$(sql "SELECT state || ',' || worker || ',' || attempts FROM jobs WHERE id = $job")" "running,true-clock,1" \
  "the job stays with its worker"
wait_for 60 "job $job to finish" state_is "$job" done
expect_eq "$(sql "SELECT group_concat(worker || ':' || outcome) FROM attempts WHERE job_id = $job")" \
  "true-clock:done" "one attempt, not charged by the hour-ahead daemon"
kill -TERM "$b"
wait_pid "$b" 0

# Backoffs as a clock an hour ahead stamps them: claimable now. One within
# retry_backoff_max_ms (600 s by default) is still waited out. Set while no
# daemon runs (a daemon would claim the new jobs at once).
kill -TERM "$a"
wait_pid "$a" 0
near=$(ns submit --config "$CONFIG" --model slow --max-tokens 2 --ignore-eos "Waits its backoff")
far=$(ns submit --config "$CONFIG" --model slow --max-tokens 2 --ignore-eos "Stamped an hour ahead")
sql "UPDATE jobs SET not_before_ms = $(now_ms) + 300000, error_kind = 'lease_expired', error = 'x' WHERE id = $near;
     UPDATE jobs SET not_before_ms = $(now_ms) + 3600000, error_kind = 'lease_expired', error = 'x' WHERE id = $far"
"$NIGHTSHIFTD" --config "$WORK/a.yaml" > "$WORK/daemon-a.log" 2>&1 &
a=$!
EXTRA_PIDS+=("$a")
wait_for 30 "job $far to be done" state_is "$far" done
expect_eq "$(job_state "$near")" queued "the job within the longest backoff still waits"
kill -TERM "$a"
wait_pid "$a" 0
echo "ok"
