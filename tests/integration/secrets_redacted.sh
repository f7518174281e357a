# Issue #30 C: a database password with '?' or '/' in it is never printed nor
# stored: not in the daemon's start line, not in CLI errors, not in
# migrate-queue's output, not in the target's queue_migrations.source.
# Skipped (exit 77) where the PostgreSQL server is not installed.
source "$(dirname "$0")/lib.sh"

start_pg_server || {
  echo "skipped: $PG_SKIP"
  exit 77
}
# The test server trusts its socket: the password is carried, never checked.
SECRET='Qx?hunter2pw'
URL="postgresql://nightshift:${SECRET}@/nightshift?host=${PG_DIR}"
expect_no_secret() {  # expect_no_secret TEXT WHAT
  [[ "$1" != *hunter2* && "$1" != *S3cr* && "$1" != *tPw* ]] || fail "$2 shows the password: $1"
}

make_model tiny.gguf
write_config tiny=tiny.gguf

expect_exit 0 ns submit --db "$URL" --model tiny --max-tokens 3 --ignore-eos "One prompt"
expect_no_secret "$OUT" "submit"

# migrate-queue: its report and the target's record of the source.
expect_exit 0 ns migrate-queue --from "$URL" --to "$WORK/copy.db"
expect_no_secret "$OUT" "migrate-queue's report"
expect_contains "$OUT" "nightshift:***@" "migrate-queue names the source, redacted"
source_row=$("$SQLITE3" "$WORK/copy.db" "SELECT source FROM queue_migrations")
expect_no_secret "$source_row" "queue_migrations.source"
expect_eq "$source_row" "postgresql://nightshift:***@/nightshift?host=${PG_DIR}" "queue_migrations.source"

# The daemon's start line (and everything else it logs).
"$NIGHTSHIFTD" --config "$CONFIG" --db "$URL" --drain > "$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
wait_daemon 0
log=$(cat "$WORK/daemon.log")
expect_contains "$log" "database postgresql://nightshift:***@/nightshift" "the start line"
expect_no_secret "$log" "the daemon's log"
expect_eq "$(pgq "SELECT state FROM jobs")" "done" "the job ran"

# CLI errors: a database that does not exist, and a password with '/' libpq cannot parse.
expect_exit 1 ns list --db "postgresql://nightshift:${SECRET}@/no_such_db?host=${PG_DIR}"
expect_no_secret "$OUT" "list's error"
expect_contains "$OUT" "nightshift:***@" "list's error names the database, redacted"
status=0
OUT=$(ns list --db "postgresql://nightshift:S3cr?tPw/zz@/nightshift?host=${PG_DIR}" 2>&1) || status=$?
[[ "$status" != 0 ]] || fail "list on an unparsable URL succeeded: $OUT"
expect_no_secret "$OUT" "list's error on a password with '/'"
echo "ok"
