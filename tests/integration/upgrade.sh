# A database written by the previous release (schema 001, made here with the
# sqlite3 shell from schema/sqlite/001_init.sql) is upgraded in place by the
# first binary that opens it: no row, result or id is lost, and a job the old
# daemon left `running` is recovered and finished.
source "$(dirname "$0")/lib.sh"
: "${NS_SOURCE_DIR:?set by CMake: the source tree}"

make_model tiny.gguf
write_config tiny=tiny.gguf
"$SQLITE3" "$DB" < "$NS_SOURCE_DIR/schema/sqlite/001_init.sql"
sql "PRAGMA journal_mode = WAL; PRAGMA user_version = 1;" > /dev/null
cols="model, prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed, stop,
      ignore_eos, priority, idempotency_key, state, created_ms, created_at, started_ms, started_at, finished_ms,
      finished_at, worker, attempts"
sql "INSERT INTO jobs ($cols) VALUES
       ('tiny', 'finished under 001', 4, 0, 40, 0.95, 0.05, 1, 64, 0, '[]', 1, 0, 'old-1', 'done',
        1000, '1970-01-01T00:00:01.000Z', 1100, 's', 1200, 'f', 'old-host:1', 1),
       ('tiny', 'left running by the old daemon', 4, 0, 40, 0.95, 0.05, 1, 64, 0, '[]', 1, 5, NULL, 'running',
        2000, '1970-01-01T00:00:02.000Z', 2100, 's', NULL, NULL, 'old-host:1', 1),
       ('tiny', 'queued under 001', 4, 0, 40, 0.95, 0.05, 1, 64, 0, '[\"\\n\"]', 1, 0, NULL, 'queued',
        3000, '1970-01-01T00:00:03.000Z', NULL, NULL, NULL, NULL, NULL, 0);
     INSERT INTO results VALUES (1, 'the old text', 'length', 3, 4, 100, 1, 2, 3, 4, 5, 6, 7);"

expect_exit 0 ns list --config "$CONFIG"  # the first open migrates
latest=$(ls "$NS_SOURCE_DIR"/schema/sqlite/[0-9][0-9][0-9]_*.sql | wc -l)
expect_eq "$(sql "PRAGMA user_version")" "$latest" "schema version after the upgrade"
states() { sql "SELECT group_concat(s, ' ') FROM (SELECT id || ':' || state AS s FROM jobs ORDER BY id)"; }
expect_eq "$(states)" "1:done 2:running 3:queued" "rows kept"
expect_eq "$(sql "SELECT text FROM results WHERE job_id = 1")" "the old text" "old result kept"
expect_eq "$(sql "SELECT idempotency_key || ',' || attempt || ',' || max_attempts FROM jobs WHERE id = 1")" "old-1,1,3" \
  "old columns kept, new ones defaulted"
expect_eq "$(sql "PRAGMA foreign_key_check")" "" "foreign keys after the upgrade"
expect_eq "$(sql "PRAGMA integrity_check")" "ok" "integrity after the upgrade"

start_daemon --drain
wait_daemon 0
expect_eq "$(states)" "1:done 2:done 3:done" "states after the daemon"
expect_eq "$(sql "SELECT group_concat(s, ' ') FROM (SELECT attempt || ':' || outcome AS s FROM attempts WHERE job_id = 2 ORDER BY attempt)")" \
  "1:lease_expired 2:done" "the job left running was recovered and run again"
expect_eq "$(sql "SELECT text FROM results WHERE job_id = 1")" "the old text" "the finished job was not touched"
expect_contains "$(cat "$WORK/daemon.log")" "jobs whose lease expired: 1 job(s) taken back" "recovery logged"
new=$(ns submit --config "$CONFIG" --model tiny "after the upgrade")
expect_eq "$new" 4 "ids continue"
echo "ok"
