# Issue #30 C: `password_file:` gives the PostgreSQL password from a 0600 file,
# so it is in no URL, `ps` line, environment or log; a file its group or
# others may read is refused with the fix. The server asks for the password
# (scram-sha-256): without the file nothing connects. Skipped (exit 77) where
# the PostgreSQL server is not installed.
source "$(dirname "$0")/lib.sh"

start_pg_server || {
  echo "skipped: $PG_SKIP"
  exit 77
}
SECRET='Pw?se/cr@t#9-hunter2'
expect_no_secret() {  # expect_no_secret TEXT WHAT
  [[ "$1" != *hunter2* ]] || fail "$2 shows the password: $1"
}
# From trust to password authentication; the test's own queries pass the password through libpq's environment.
pgq "ALTER USER nightshift PASSWORD '$SECRET'"
sed -i -E 's/(trust)$/scram-sha-256/' "$PG_DIR/data/pg_hba.conf"
pgq "SELECT pg_reload_conf()" > /dev/null
asks_password() { ! psql "$PG_URL" -X -q -At -w -c "SELECT 1" > /dev/null 2>&1; }
wait_for 30 "the server to ask for a password" asks_password
pgq() { PGPASSWORD=$SECRET psql "$PG_URL" -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }

make_model tiny.gguf
write_config tiny=tiny.gguf
{ grep -v '^database:' "$CONFIG"; echo "database: \"$PG_URL\""; echo "password_file: secret.txt"; } > "$WORK/c.yaml"
mv "$WORK/c.yaml" "$CONFIG"
printf '%s\n' "$SECRET" > "$WORK/secret.txt"

# 1. A file others may read is refused, naming the file and the fix; the secret is not shown.
chmod 644 "$WORK/secret.txt"
expect_exit 1 ns submit --config "$CONFIG" --model tiny --max-tokens 2 "refused"
expect_contains "$OUT" "password_file $WORK/secret.txt may be read by its group or others (mode 0644)" "the CLI's error"
expect_contains "$OUT" "chmod 600 $WORK/secret.txt" "the fix"
expect_no_secret "$OUT" "the CLI's error"
start_daemon --drain
wait_daemon 1
expect_contains "$(cat "$WORK/daemon.log")" "may be read by its group or others" "the daemon's refusal"
expect_no_secret "$(cat "$WORK/daemon.log")" "the daemon's refusal"

# 2. Without the file the server refuses the connection (the password is checked).
expect_exit 1 ns list --db "$PG_URL"
expect_contains "$OUT" "password" "list without the password"

# 3. 0600: the CLI (with --config) and the daemon connect with it.
chmod 600 "$WORK/secret.txt"
id=$(ns submit --config "$CONFIG" --model tiny --max-tokens 3 --ignore-eos "with a password file")
start_daemon
wait_for 30 "the daemon to be ready" grep -q "ready:" "$WORK/daemon.log"
expect_no_secret "$(ps -ww -o args= -p "$DAEMON_PID")" "ps"
expect_no_secret "$(tr '\0' '\n' < "/proc/$DAEMON_PID/environ")" "the daemon's environment"
job_done() { [[ "$(pgq "SELECT state FROM jobs WHERE id = $id")" == done ]]; }
wait_for 30 "job $id to be done" job_done
kill -TERM "$DAEMON_PID"
wait_daemon 0
expect_no_secret "$(cat "$WORK/daemon.log")" "the daemon's log"
expect_exit 0 ns list --config "$CONFIG"
expect_contains "$OUT" "done" "list with --config reads the queue"
expect_no_secret "$OUT" "list"
echo "ok"
