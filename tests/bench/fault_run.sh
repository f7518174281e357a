#!/usr/bin/env bash
# A randomized fault run (issue 30's last criterion): two nightshiftd daemons
# on one queue (a SQLite file, or a throwaway PostgreSQL server) work through
# jobs that keep arriving while faults from a seeded schedule hit them:
#
#   kill9     kill -9 a daemon, restart it
#   sigterm   SIGTERM a daemon (a clean drain), restart it
#   stop      SIGSTOP a daemon for longer than lease_ms, then SIGCONT (the
#             other one takes its jobs over; its late writes must be refused)
#   diskfull  fill the filesystem of the database (a tmpfs mounted for the run:
#             SQLite's file, or PostgreSQL's data directory) for a few seconds
#   dbrestart PostgreSQL only: restart the server (-m fast or -m immediate)
#   clock     jump a daemon's wall clock (libfaketime, package faketime) by
#             -1 h .. +1 day for a few seconds, then back
#
# The jobs are OpenAI Batch lines (tests/bench/fault_run_jobs.py): greedy and
# seeded sampling, --ignore-eos, varied prompts and max_tokens, some with n > 1,
# logprobs or stop strings. At the end the fleet drains, then one daemon
# without faults runs the same submitted files on a fresh SQLite file (the
# uninterrupted reference), and fault_run_check.py checks: every job done,
# once (one jobs row per custom_id, one result, one `done` attempt, the last
# one; at most one "job N done" line in all logs), its text, choices, logprobs
# and token counts equal to the reference. It prints a summary table.
#
#   fault_run.sh sqlite|postgres [DURATION_S=1800] [SEED=random]
#
# Environment: BUILD (build directory, default ./build), KEEP (folder for the
# logs and the summary, default /var/tmp/ns-fault-run/BACKEND-SEED), GAP_MIN /
# GAP_MAX (seconds between faults, default 4 / 14), DRAIN_S (how long the fleet
# may take to finish once the faults stop, default 600). Needs root for the tmpfs
# mounts (diskfull is skipped with a message otherwise), python3, sqlite3, and
# for postgres the server binaries and psql. Exit 0: no finding; 1: a finding
# (the summary says which); 2: bad usage or a missing tool.
set -euo pipefail

BACKEND=${1:-}
DURATION=${2:-1800}
SEED=${3:-$((RANDOM * 32768 + RANDOM))}
if [[ "$BACKEND" != sqlite && "$BACKEND" != postgres ]] || ! [[ "$DURATION" =~ ^[0-9]+$ && "$SEED" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 sqlite|postgres [DURATION_S=1800] [SEED]" >&2
  exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
NS_SOURCE_DIR=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "${BUILD:-$NS_SOURCE_DIR/build}" && pwd)
export NS_SOURCE_DIR
export NIGHTSHIFT="$BUILD/daemon/nightshift" NIGHTSHIFTD="$BUILD/daemon/nightshiftd"
export MAKE_MODEL="$BUILD/tools/nightshift-make-model" SQLITE3=${SQLITE3:-$(command -v sqlite3 || true)}
for b in "$NIGHTSHIFT" "$NIGHTSHIFTD" "$MAKE_MODEL"; do
  [[ -x "$b" ]] || { echo "missing $b: build it (ninja -C build nightshift nightshiftd nightshift-make-model)" >&2; exit 2; }
done
command -v python3 > /dev/null && [[ -n "$SQLITE3" ]] || { echo "needs python3 and sqlite3" >&2; exit 2; }
KEEP=${KEEP:-/var/tmp/ns-fault-run/$BACKEND-$SEED}
GAP_MIN=${GAP_MIN:-4}
GAP_MAX=${GAP_MAX:-14}
DRAIN_S=${DRAIN_S:-600}
LEASE_MS=3000
source "$NS_SOURCE_DIR/tests/integration/lib.sh"
mkdir -p "$KEEP"
LOG="$KEEP/fault_run.log"
: > "$LOG"
say() { echo "[$(date +%H:%M:%S) +$((SECONDS - T0))s] $*" | tee -a "$LOG"; }
T0=$SECONDS

# Logs survive the work directory: copied to $KEEP at exit, whatever happens.
MOUNTS=()
keep_logs() {
  cp "$WORK"/*.log "$KEEP/" 2> /dev/null || true
  [[ -z "${PG_DIR:-}" ]] || cp "$PG_DIR/server.log" "$KEEP/pg-server.log" 2> /dev/null || true
}
on_exit() {
  local d
  for d in a b; do
    local v="PID_$d"
    [[ -z "${!v:-}" ]] || { kill -KILL "${!v}" && kill -CONT "${!v}"; } 2> /dev/null || true
  done
  keep_logs
  if [[ -n "${PG_DIR:-}" ]]; then bash "$NS_SOURCE_DIR/tests/support/pg_test_server.sh" stop "$PG_DIR" || true; fi
  CLEANUP_EXTRA=""
  cleanup
  for m in "${MOUNTS[@]}"; do umount -l "$m" 2> /dev/null || true; rmdir "$m" 2> /dev/null || true; done
}
trap on_exit EXIT

# The RNG: bash's $RANDOM seeded once, read only in this shell (never in a
# subshell), so a seed replays the same schedule.
RANDOM=$SEED
rnd() { R=$((RANDOM % $1)); }  # R in [0, $1)
say "fault run: backend $BACKEND, duration ${DURATION}s, seed $SEED, build $BUILD, logs in $KEEP"
say "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- kinds of fault available here -------------------------------------------------------------------------
declare -A INJECTED=() SKIPPED=()
KINDS=(kill9 kill9 sigterm stop stop diskfull clock)
[[ "$BACKEND" == postgres ]] && KINDS+=(dbrestart dbrestart)
for k in "${KINDS[@]}"; do INJECTED[$k]=0; SKIPPED[$k]=0; done
SKIP_WHY=()
FAKETIME_LIB=""
for f in /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 /usr/lib/*/faketime/libfaketimeMT.so.1; do
  [[ -f "$f" ]] && { FAKETIME_LIB=$f; break; }
done
[[ -n "$FAKETIME_LIB" ]] || SKIP_WHY+=("clock: libfaketime not found (apt-get install faketime); clock jumps skipped")

# A small tmpfs for the database (SQLite) or the server's data (PostgreSQL): a disk that can fill up.
# Outside $WORK (mode 0700): PostgreSQL's user must reach its directory.
DBFS=$(mktemp -d "${TMPDIR:-/tmp}/ns-fault-fs-XXXXXX")
chmod 755 "$DBFS"
DISKFULL_OK=0
if [[ "$(id -u)" == 0 ]] && mount -t tmpfs -o size=$([[ "$BACKEND" == postgres ]] && echo 384m || echo 64m) tmpfs "$DBFS" \
  2> "$WORK/mount.err"; then
  MOUNTS+=("$DBFS")
  chmod 755 "$DBFS"
  DISKFULL_OK=1
else
  rmdir "$DBFS"
  DBFS="$WORK/dbfs"
  mkdir -p "$DBFS"
  SKIP_WHY+=("diskfull: cannot mount a tmpfs here (needs root): $(cat "$WORK/mount.err" 2> /dev/null); skipped")
fi
for w in "${SKIP_WHY[@]}"; do say "NOTE $w"; done

# ---- the queue -------------------------------------------------------------------------------------------
if [[ "$BACKEND" == postgres ]]; then
  PG_BINDIR=$(ls -d /usr/lib/postgresql/*/bin 2> /dev/null | sort -V | tail -1)
  [[ -n "$PG_BINDIR" && -x "$PG_BINDIR/pg_ctl" ]] || { echo "PostgreSQL server not installed" >&2; exit 2; }
  command -v psql > /dev/null || { echo "psql not found (postgresql-client)" >&2; exit 2; }
  if ((DISKFULL_OK)); then PG_DIR="$DBFS/pg"; else PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ns-pg-XXXXXX"); fi
  # Not watched by pid: this script stops it at exit (the watcher would remove it under a restart).
  QUEUE=$(bash "$NS_SOURCE_DIR/tests/support/pg_test_server.sh" start "$PG_DIR") || { echo "no PostgreSQL server" >&2; exit 2; }
  # The test server trades durability for speed (synchronous_commit off): then an immediate shutdown
  # loses commits already acknowledged, a loss the daemon cannot help. Durable commits, as in production.
  psql "$QUEUE" -X -q -v ON_ERROR_STOP=1 -c "ALTER DATABASE nightshift SET synchronous_commit = on" ||
    fail "setting synchronous_commit"
  PG_USER=postgres
  id postgres > /dev/null 2>&1 || PG_USER=nobody
  [[ "$(id -u)" == 0 ]] || PG_USER=$(id -un)
  pg_ctl_as() { if [[ "$(id -u)" == 0 ]]; then runuser -u "$PG_USER" -- "$PG_BINDIR/pg_ctl" "$@"; else "$PG_BINDIR/pg_ctl" "$@"; fi; }
  FILLER="$DBFS/filler"
else
  QUEUE="$DBFS/q.db"
  FILLER="$DBFS/filler"
fi
q() {  # one query against the fleet's queue, rows on lines, columns '|' separated
  if [[ "$BACKEND" == postgres ]]; then
    psql "$QUEUE" -X -q -At -v ON_ERROR_STOP=1 -c "$1"
  else
    "$SQLITE3" -cmd ".timeout 5000" "$QUEUE" "$1"
  fi
}

# ---- model, config, jobs ---------------------------------------------------------------------------------
make_model m.gguf --n-embd 384 --n-layer 8 --n-ff 1024 --n-ctx 4096
write_config m=m.gguf
sed -i '/^database:/d' "$CONFIG"
{
  echo "threads: 1"
  echo "context: 2048"
  echo "max_batch: 8"
  echo "lease_ms: $LEASE_MS"
  echo "checkpoint_tokens: 8"
  echo "checkpoint_interval_ms: 0"
  echo "retry_backoff_max_ms: 2000"
} >> "$CONFIG"
sed -i 's/^threads: 2$//' "$CONFIG"
for d in a b; do
  { echo "database: q.db"; echo "worker_id: fault-$d"; cat "$CONFIG"; } > "$WORK/$d.yaml"
done
{ echo "database: ref.db"; echo "worker_id: reference"; cat "$CONFIG"; } > "$WORK/ref.yaml"
sed -i 's/^threads: 1$/threads: 2/' "$WORK/ref.yaml"
WAVES=$((DURATION / 2 + 10))  # more than the fleet can run: the backlog never runs dry
python3 "$HERE/fault_run_jobs.py" --seed "$SEED" --waves "$WAVES" --out "$WORK/waves" ||
  fail "generating the jobs"

SUBMITTED=()  # wave files submitted, in order
submit_wave() {  # submit_wave K: retried while the queue cannot take it (a fault is on)
  local f
  f=$(printf '%s/waves/w%03d.jsonl' "$WORK" "$1")
  local deadline=$((SECONDS + 300)) rc
  while true; do
    rc=0
    "$NIGHTSHIFT" submit --db "$QUEUE" --jsonl "$f" --batch "$(basename "$f" .jsonl)" --max-attempts 100 \
      > "$WORK/submit.out" 2>&1 || rc=$?
    [[ "$rc" == 0 ]] && break
    [[ "$rc" == 1 ]] || fail "submit of $f exited $rc: $(cat "$WORK/submit.out")"
    ((SECONDS < deadline)) || fail "submit of $f failed for 300 s: $(cat "$WORK/submit.out")"
    echo "submit of wave $1 failed (exit 1), retrying: $(head -c 300 "$WORK/submit.out")" >> "$LOG"
    sleep 1
  done
  SUBMITTED+=("$f")
}

# ---- daemons ---------------------------------------------------------------------------------------------
declare -A STARTS=() UNEXPECTED=()
UNEXPECTED_TOTAL=0
start_d() {  # start_d a|b: under libfaketime (its clock file at +0) when available
  local d=$1
  echo "+0" > "$WORK/clock-$d"
  echo "=== start $((${STARTS[$d]:-0} + 1)) at $(date +%T)" >> "$WORK/daemon-$d.log"
  if [[ -n "$FAKETIME_LIB" ]]; then
    # Only the wall clock jumps (steady_clock stays true, as on a real machine); the file is re-read every second.
    LD_PRELOAD="$FAKETIME_LIB" FAKETIME_TIMESTAMP_FILE="$WORK/clock-$d" FAKETIME_DONT_FAKE_MONOTONIC=1 \
      FAKETIME_CACHE_DURATION=1 "$NIGHTSHIFTD" --config "$WORK/$d.yaml" --db "$QUEUE" >> "$WORK/daemon-$d.log" 2>&1 &
  else
    "$NIGHTSHIFTD" --config "$WORK/$d.yaml" --db "$QUEUE" >> "$WORK/daemon-$d.log" 2>&1 &
  fi
  printf -v "PID_$d" '%s' "$!"
  STARTS[$d]=$((${STARTS[$d]:-0} + 1))
}
pid_of() { local v="PID_$1"; echo "${!v}"; }
reap() {  # reap D EXPECTED: waits for daemon D to end; one it did not expect to end is a finding
  local d=$1 expected=$2 pid rc=0
  pid=$(pid_of "$d")
  wait "$pid" 2> /dev/null || rc=$?
  if [[ "$expected" == no ]]; then
    UNEXPECTED[$d]="${UNEXPECTED[$d]:-} rc=$rc@$((SECONDS - T0))s"
    UNEXPECTED_TOTAL=$((UNEXPECTED_TOTAL + 1))
    say "FINDING: daemon $d exited on its own with status $rc; its last lines:"
    tail -n 15 "$WORK/daemon-$d.log" | sed 's/^/    /' | tee -a "$LOG"
  fi
}
check_alive() {  # restarts a daemon that ended without being told to (a finding)
  local d
  for d in a b; do
    if ! kill -0 "$(pid_of "$d")" 2> /dev/null; then
      reap "$d" no
      start_d "$d"
    fi
  done
}

# ---- faults ----------------------------------------------------------------------------------------------
fault() {  # fault KIND: one episode, the daemons running again at its end
  local kind=$1 d hold
  rnd 2
  d=$([[ $R == 0 ]] && echo a || echo b)
  case "$kind" in
    kill9)
      rnd 3
      hold=$R
      say "kill9: daemon $d (pid $(pid_of $d)), restart after ${hold}s"
      kill -KILL "$(pid_of $d)" 2> /dev/null || true
      reap "$d" yes
      sleep "$hold"
      start_d "$d"
      ;;
    sigterm)
      say "sigterm: daemon $d (pid $(pid_of $d))"
      kill -TERM "$(pid_of $d)" 2> /dev/null || true
      local deadline=$((SECONDS + 60))
      while kill -0 "$(pid_of $d)" 2> /dev/null && ((SECONDS < deadline)); do sleep 0.1; done
      if kill -0 "$(pid_of $d)" 2> /dev/null; then
        say "FINDING: daemon $d still running 60 s after SIGTERM; killed"
        UNEXPECTED_TOTAL=$((UNEXPECTED_TOTAL + 1))
        kill -KILL "$(pid_of $d)"
      fi
      reap "$d" yes
      start_d "$d"
      ;;
    stop)
      rnd 4000
      hold=$((LEASE_MS + 1000 + R))
      say "stop: daemon $d (pid $(pid_of $d)) SIGSTOP for ${hold} ms (lease $LEASE_MS ms)"
      kill -STOP "$(pid_of $d)" 2> /dev/null || true
      sleep "$(printf '%d.%03d' $((hold / 1000)) $((hold % 1000)))"
      kill -CONT "$(pid_of $d)" 2> /dev/null || true
      ;;
    diskfull)
      rnd 6
      hold=$((2 + R))
      if ((!DISKFULL_OK)); then
        SKIPPED[$kind]=$((SKIPPED[$kind] + 1))
        return
      fi
      dd if=/dev/zero of="$FILLER" bs=1M 2> /dev/null || true
      say "diskfull: $(df --output=avail -B1 "$DBFS" | tail -1) bytes left on the database's filesystem for ${hold}s"
      sleep "$hold"
      rm -f "$FILLER"
      if [[ "$BACKEND" == postgres ]] && ! pg_ctl_as --pgdata="$PG_DIR/data" status > /dev/null 2>&1; then
        say "diskfull: the PostgreSQL server went down on the full disk; starting it again"
        pg_ctl_as --pgdata="$PG_DIR/data" --log="$PG_DIR/server.log" --wait --timeout=60 start > /dev/null 2>&1 ||
          fail "PostgreSQL did not start after the full disk"
      fi
      ;;
    dbrestart)
      rnd 2
      local mode
      mode=$([[ $R == 0 ]] && echo fast || echo immediate)
      say "dbrestart: PostgreSQL restart -m $mode"
      pg_ctl_as --pgdata="$PG_DIR/data" --log="$PG_DIR/server.log" -m "$mode" --wait --timeout=60 restart \
        > /dev/null 2>&1 || fail "PostgreSQL did not restart"
      ;;
    clock)
      if [[ -z "$FAKETIME_LIB" ]]; then
        SKIPPED[$kind]=$((SKIPPED[$kind] + 1))
        return
      fi
      local offsets=(-3600 -600 -90 +90 +600 +3600 +86400) off
      rnd ${#offsets[@]}
      off=${offsets[$R]}
      rnd 8
      hold=$((2 + R))
      say "clock: daemon $d's wall clock ${off}s for ${hold}s"
      echo "${off}s" > "$WORK/clock-$d"
      sleep "$hold"
      echo "+0" > "$WORK/clock-$d"
      sleep 1.2  # the daemon's libfaketime re-reads its file every second
      ;;
  esac
  INJECTED[$kind]=$((INJECTED[$kind] + 1))
}

backlog() { q "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')" 2> /dev/null || echo 999; }

# ---- the run ---------------------------------------------------------------------------------------------
WAVE=0
submit_wave $WAVE
WAVE=$((WAVE + 1))
start_d a
start_d b
say "daemons a (pid $PID_a) and b (pid $PID_b) started; $(q "SELECT count(*) FROM jobs") jobs queued"
END=$((SECONDS + DURATION))
while ((SECONDS < END)); do
  rnd $((GAP_MAX - GAP_MIN + 1))
  gap_end=$((SECONDS + GAP_MIN + R))
  while ((SECONDS < gap_end && SECONDS < END)); do
    sleep 1
    check_alive
    # More work arrives whenever the backlog runs low (the wave contents come from the seed).
    if ((WAVE < WAVES)) && (($(backlog) < 12)); then
      submit_wave $WAVE
      WAVE=$((WAVE + 1))
    fi
  done
  ((SECONDS < END)) || break
  rnd ${#KINDS[@]}
  fault "${KINDS[$R]}"
  check_alive
done

say "faults over; draining: $(backlog) jobs queued or running"
drain_deadline=$((SECONDS + DRAIN_S))
while true; do
  check_alive
  left=$(q "SELECT count(*) FROM jobs WHERE state <> 'done'" 2> /dev/null || echo "?")
  [[ "$left" == 0 ]] && break
  if ((SECONDS > drain_deadline)); then
    say "FINDING: $left jobs not done $DRAIN_S s after the faults stopped:"
    q "SELECT id, custom_id, state, worker, attempts, attempt, lease_expires_ms, not_before_ms, error_kind
       FROM jobs WHERE state <> 'done' LIMIT 20" |
      tee -a "$LOG"
    break
  fi
  sleep 2
done
for d in a b; do kill -TERM "$(pid_of $d)" 2> /dev/null || true; done
for d in a b; do reap "$d" yes; done
say "fleet stopped; $(q "SELECT count(*) FROM jobs") jobs, $(q "SELECT count(*) FROM jobs WHERE state = 'done'") done"

# ---- the uninterrupted reference -------------------------------------------------------------------------
REF="$WORK/ref.db"
for f in "${SUBMITTED[@]}"; do
  "$NIGHTSHIFT" submit --db "$REF" --jsonl "$f" --batch "$(basename "$f" .jsonl)" > /dev/null ||
    fail "reference submit of $f"
done
say "reference: one daemon, no faults, $("$SQLITE3" "$REF" "SELECT count(*) FROM jobs") jobs"
"$NIGHTSHIFTD" --config "$WORK/ref.yaml" --db "$REF" --drain > "$WORK/reference.log" 2>&1 || fail "the reference run failed"
say "reference done"

# ---- the check -------------------------------------------------------------------------------------------
dump() {  # dump SQL_QUERY_PRODUCING_JSON_LINES
  if [[ "$BACKEND" == postgres ]]; then psql "$QUEUE" -X -q -At -v ON_ERROR_STOP=1 -c "$1"; else "$SQLITE3" "$QUEUE" "$1"; fi
}
if [[ "$BACKEND" == postgres ]]; then
  J="json_build_object"
else
  J="json_object"
fi
JOBS_SQL="SELECT $J('id', j.id, 'custom_id', j.custom_id, 'state', j.state, 'attempts', j.attempts,
  'attempt', j.attempt, 'worker', j.worker, 'has_result', r.job_id IS NOT NULL, 'text', r.text,
  'finish_reason', r.finish_reason, 'prompt_tokens', r.prompt_tokens, 'completion_tokens', r.completion_tokens,
  'choices', r.choices, 'logprobs', r.logprobs) FROM jobs j LEFT JOIN results r ON r.job_id = j.id ORDER BY j.id"
ATT_SQL="SELECT $J('job_id', job_id, 'attempt', attempt, 'worker', worker, 'outcome', outcome,
  'resumed_tokens', resumed_tokens, 'error_kind', error_kind) FROM attempts ORDER BY job_id, attempt"
dump "$JOBS_SQL" > "$WORK/fault-jobs.jsonl"
dump "$ATT_SQL" > "$WORK/fault-attempts.jsonl"
CHECKPOINTS_LEFT=$(q "SELECT count(*) FROM checkpoints")
SQLITE3_Q="$SQLITE3"
"$SQLITE3_Q" "$REF" "${JOBS_SQL//json_build_object/json_object}" > "$WORK/ref-jobs.jsonl"
cat "$WORK"/daemon-*.log | grep -o "job [0-9]* done:" | sort | uniq -c | awk '$1 > 1 {print $3}' > "$WORK/done-twice.txt" || true
faults_line=""
for k in kill9 sigterm stop diskfull dbrestart clock; do
  [[ -n "${INJECTED[$k]+x}" ]] && faults_line+="$k=${INJECTED[$k]}/${SKIPPED[$k]} "
done
unexpected_line=""
for d in a b; do unexpected_line+="$d:${UNEXPECTED[$d]:- none} "; done
keep_logs
cp "$WORK"/*.jsonl "$KEEP/" 2> /dev/null || true
rc=0
python3 "$HERE/fault_run_check.py" --fault "$WORK/fault-jobs.jsonl" --attempts "$WORK/fault-attempts.jsonl" \
  --reference "$WORK/ref-jobs.jsonl" --done-twice "$WORK/done-twice.txt" --checkpoints-left "$CHECKPOINTS_LEFT" \
  --backend "$BACKEND" --seed "$SEED" --duration "$DURATION" --elapsed "$((SECONDS - T0))" \
  --faults "$faults_line" --unexpected-exits "$UNEXPECTED_TOTAL" --unexpected-detail "$unexpected_line" \
  --starts "a=${STARTS[a]} b=${STARTS[b]}" --notes "$(printf '%s; ' "${SKIP_WHY[@]}")" | tee "$KEEP/summary.txt" ||
  rc=1
((UNEXPECTED_TOTAL == 0)) || rc=1
say "logs, dumps and the summary in $KEEP"
exit $rc
