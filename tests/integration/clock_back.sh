# Issue #30 L: a backward clock jump. A daemon whose wall clock ran two hours
# ahead (libfaketime) is killed mid-job; the daemon started after it with the
# true clock (as after the clock was set back and the service restarted)
# takes the job back at once, not when the lease stamped by the fast clock
# runs out two hours later, and runs it to the end, the attempt not charged
# (no fault of the job's). (Before: the job sat `running` for two hours.)
# Skipped (exit 77) without libfaketime (apt-get install faketime).
source "$(dirname "$0")/lib.sh"
FAKETIME_LIB=""
for f in /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 /usr/lib/*/faketime/libfaketimeMT.so.1; do
  [[ -f "$f" ]] && { FAKETIME_LIB=$f; break; }
done
[[ -n "$FAKETIME_LIB" ]] || { echo "skipped: libfaketime not found (apt-get install faketime)"; exit 77; }

slow_model_config slow "lease_ms: 3000"
sed 's/^database: q.db$/database: q.db\nworker_id: before-jump/' "$CONFIG" > "$WORK/a.yaml"
sed 's/^database: q.db$/database: q.db\nworker_id: after-jump/' "$CONFIG" > "$WORK/b.yaml"
job=$(ns submit --config "$CONFIG" --model slow --max-tokens 200 --ignore-eos --temperature 0 "A story")

LD_PRELOAD="$FAKETIME_LIB" FAKETIME="+2h" FAKETIME_DONT_FAKE_MONOTONIC=1 \
  "$NIGHTSHIFTD" --config "$WORK/a.yaml" > "$WORK/daemon-a.log" 2>&1 &
a=$!
EXTRA_PIDS+=("$a")
wait_for 30 "job $job to run under the fast clock" state_is "$job" running
ahead=$(($(sql "SELECT lease_expires_ms FROM jobs WHERE id = $job") - $(now_ms)))
((ahead > 3600 * 1000)) || fail "the lease is not hours ahead ($ahead ms): is libfaketime working?"
{ kill -KILL "$a" && wait "$a"; } 2> /dev/null || true

: > "$WORK/daemon.log"
"$NIGHTSHIFTD" --config "$WORK/b.yaml" --drain >> "$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
wait_daemon 0
expect_eq "$(job_state "$job")" done "the job after the clock went back"
expect_eq "$(sql "SELECT attempts FROM jobs WHERE id = $job")" 1 "attempts charged (the clock's fault, not the job's)"
echo "ok"
