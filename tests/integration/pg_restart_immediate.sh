# PostgreSQL stopped with `-m immediate` (a server crash, an OOM kill of the
# postmaster, a failover) while two daemons poll and work: every connection
# is cut without a goodbye. The daemons must reconnect, not exit: the
# randomized fault run (tests/bench/fault_run.sh, seed 757274813) saw a daemon
# exit 1 with `[critical] ... server closed the connection unexpectedly ... in:
# SELECT 1 FROM jobs WHERE state = 'queued' ...` (no SQLSTATE, and libpq still
# called the connection OK, so the error was taken as permanent). Eight
# immediate restarts; then every job is done once. Skipped (exit 77) where the
# PostgreSQL server is not installed.
source "$(dirname "$0")/lib.sh"
start_pg_server || {
  echo "skipped: $PG_SKIP"
  exit 77
}
# A command failing under set -e would end the test without a word (it did once under ctest -j4): name it,
# with the daemons' logs (fail) and the server's.
trap 'fail "line $LINENO: \"$BASH_COMMAND\" exited $?; server log: $(tail -n 30 "$PG_DIR/server.log" 2> /dev/null)"' ERR
pgq "ALTER DATABASE nightshift SET synchronous_commit = on"  # an immediate stop must not lose commits
make_model tiny.gguf
write_config tiny=tiny.gguf
echo "lease_ms: 3000" >> "$CONFIG"
for w in a b; do
  sed "s/^database: q.db$/database: q.db\nworker_id: pgi-$w/" "$CONFIG" > "$WORK/$w.yaml"
  "$NIGHTSHIFTD" --config "$WORK/$w.yaml" --db "$PG_URL" > "$WORK/daemon-$w.log" 2>&1 &
  EXTRA_PIDS+=("$!")
done
PID_a=${EXTRA_PIDS[0]}
PID_b=${EXTRA_PIDS[1]}
both_ready() { grep -q "ready:" "$WORK/daemon-a.log" && grep -q "ready:" "$WORK/daemon-b.log"; }
wait_for 30 "both daemons to start" both_ready

BINDIR=$(ls -d /usr/lib/postgresql/*/bin 2> /dev/null | sort -V | tail -1)
pg_ctl_as() { if [[ "$(id -u)" == 0 ]]; then runuser -u "$(stat -c %U "$PG_DIR")" -- "$BINDIR/pg_ctl" "$@"; else "$BINDIR/pg_ctl" "$@"; fi; }
for i in $(seq 1 8); do
  for j in 1 2 3 4; do echo "Immediate restart $i, job $j"; done |
    ns submit --db "$PG_URL" --model tiny --max-tokens 24 --ignore-eos --key "r$i" --prompt-lines - > /dev/null
  sleep 0.$((RANDOM % 5))  # the cut lands at varied points of polls and jobs
  pg_ctl_as --pgdata="$PG_DIR/data" --log="$PG_DIR/server.log" -m immediate --wait restart > /dev/null 2>&1 ||
    fail "PostgreSQL did not restart"
  kill -0 "$PID_a" 2> /dev/null || fail "daemon a exited after immediate restart $i"
  kill -0 "$PID_b" 2> /dev/null || fail "daemon b exited after immediate restart $i"
  echo "immediate restart $i: both daemons up, $(pgq "SELECT count(*) FROM jobs WHERE state = 'done'") job(s) done"
done
all_done() { [[ "$(pgq "SELECT count(*) FROM jobs WHERE state = 'done'")" == 32 ]]; }
wait_for 60 "the 32 jobs to be done" all_done
kill -0 "$PID_a" 2> /dev/null || fail "daemon a exited"
kill -0 "$PID_b" 2> /dev/null || fail "daemon b exited"
expect_eq "$(pgq "SELECT count(*) FROM results")" 32 "one result per job"
expect_eq "$(pgq "SELECT count(*) FROM attempts WHERE outcome = 'done'")" 32 "one done attempt per job"
kill -TERM "$PID_a" "$PID_b"
wait_pid "$PID_a" 0
wait_pid "$PID_b" 0
# Informative only: under pipefail a grep that finds nothing would fail the test.
{ grep -h "connection lost" "$WORK"/daemon-*.log || true; } | head -n 1 | cut -c1-300
echo "ok: two daemons outlived 8 immediate PostgreSQL restarts"
