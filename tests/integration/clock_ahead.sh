# Two daemons on one SQLite file, one with its wall clock an hour ahead
# (libfaketime; docs/fleet.md, finding 2), each running a job. Before the fix
# the fast-clocked daemon saw the other's healthy lease as expired and took
# the job over, the other saw the fast one's heartbeat "from the future" and
# took its job back, and so on: each take-over charged an attempt, and the
# job ended `dead` within seconds. Now a lease is taken over only once watched
# unrenewed for lease_ms on the steady clock, and each daemon says the clocks
# disagree. A retry backoff ending further ahead than retry_backoff_max_ms
# (plus a minute) is claimable at once. Skipped (exit 77) without libfaketime
# (apt-get install faketime).
source "$(dirname "$0")/lib.sh"
FAKETIME_LIB=""
for f in /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 /usr/lib/*/faketime/libfaketimeMT.so.1; do
  [[ -f "$f" ]] && { FAKETIME_LIB=$f; break; }
done
[[ -n "$FAKETIME_LIB" ]] || { echo "skipped: libfaketime not found (apt-get install faketime)"; exit 77; }

slow_model_config slow "lease_ms: 3000" "max_batch: 1"  # one job each
sed 's/^database: q.db$/database: q.db\nworker_id: true-clock/' "$CONFIG" > "$WORK/a.yaml"
sed 's/^database: q.db$/database: q.db\nworker_id: hour-ahead/' "$CONFIG" > "$WORK/b.yaml"
long_job() { ns submit --config "$CONFIG" --model slow --max-tokens 3000 --ignore-eos --temperature 0 "$1"; }

"$NIGHTSHIFTD" --config "$WORK/a.yaml" > "$WORK/daemon-a.log" 2>&1 &
a=$!
EXTRA_PIDS+=("$a")
ja=$(long_job "A long story")
wait_for 30 "job $ja to run under the true clock" state_is "$ja" running
# Only the wall clock is ahead (steady_clock stays true, as on a real machine).
LD_PRELOAD="$FAKETIME_LIB" FAKETIME="+1h" FAKETIME_DONT_FAKE_MONOTONIC=1 \
  "$NIGHTSHIFTD" --config "$WORK/b.yaml" > "$WORK/daemon-b.log" 2>&1 &
b=$!
EXTRA_PIDS+=("$b")
jb=$(long_job "Another long story")
wait_for 30 "job $jb to run under the hour-ahead clock" state_is "$jb" running
told() {  # told LOG JOB WORKER
  grep -q "job $2: the lease of worker $3 looked expired by this machine's clock" "$WORK/daemon-$1.log"
}
wait_for 30 "the hour-ahead daemon to see job $ja's lease renewed" told b "$ja" true-clock
wait_for 30 "the true-clock daemon to see job $jb's lease renewed" told a "$jb" hour-ahead
expect_eq "$(sql "SELECT group_concat(id || ':' || worker || ':' || attempts, ' ') FROM jobs WHERE state = 'running'")" \
  "$ja:true-clock:1 $jb:hour-ahead:1" "each job stays with its worker"
both_done() { state_is "$ja" done && state_is "$jb" done; }
wait_for 240 "both jobs to finish" both_done  # 46 s alone; over 90 s at load 12
expect_eq "$(sql "SELECT group_concat(job_id || ':' || worker || ':' || outcome, ' ') FROM attempts")" \
  "$ja:true-clock:done $jb:hour-ahead:done" "one attempt each, none taken over or charged"
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
