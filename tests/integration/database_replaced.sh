# The daemon notices its SQLite file deleted or replaced under it (#30 J) and
# stops loudly (exit 1) instead of writing results to an unlinked file; its
# restart serves the file now at that path, jobs held by the old run included.
# (Before: results went to the deleted file and the new file's jobs waited forever.)
source "$(dirname "$0")/lib.sh"

slow_model_config slow "worker_id: replaced-test"  # a fixed id: the restart takes its own jobs back at once
long() { ns submit --config "$CONFIG" --model slow --max-tokens "$2" --ignore-eos --temperature 0 "$1"; }

# 1. Deleted: the daemon says so and exits 1.
job=$(long "Deleted under it" 3000)
start_daemon
wait_for 30 "job $job to run" state_is "$job" running
rm -f "$DB"
wait_daemon 1
expect_contains "$(cat "$WORK/daemon.log")" "the database file was deleted while this daemon had it open" \
  "the log names the deletion"
expect_contains "$(cat "$WORK/daemon.log")" "job $job stop(s) at the next token" "the log names the running job"
[[ ! -e "$DB-wal" ]] || fail "the deleted file's WAL is still at $DB-wal, where a new queue would apply it"
fresh=$(ns submit --config "$CONFIG" --model slow --max-tokens 4 "A new queue")
expect_eq "$(sql "SELECT count(*) FROM jobs")" 1 "the new queue holds only its own job"
start_daemon --drain
wait_daemon 0
expect_eq "$(job_state "$fresh")" done "the new queue is served"

# 2. Replaced (a restored copy moved over it): the daemon exits 1; its restart
# serves the new file, including the job the copy shows running under its worker id.
job=$(long "Replaced under it" 400)
start_daemon
wait_for 30 "job $job to run" state_is "$job" running
"$SQLITE3" "$DB" ".backup '$WORK/restored.db'"
short=$(ns submit --db "$WORK/restored.db" --model slow --max-tokens 4 "Only in the restored file")
mv "$WORK/restored.db" "$DB"
wait_daemon 1
expect_contains "$(cat "$WORK/daemon.log")" "moved to $DB-wal.stale-" "the old file's WAL is set aside"
expect_contains "$(cat "$WORK/daemon.log")" "the database file was replaced by another file" "the log names the swap"
start_daemon --drain
wait_daemon 0
expect_eq "$(job_state "$short")" done "the new file's job ran"
expect_eq "$(job_state "$job")" done "the job the copy showed running was taken back and ran"
echo ok
