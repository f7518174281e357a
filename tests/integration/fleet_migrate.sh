# nightshift migrate-queue: a SQLite queue that has done some work moves to
# PostgreSQL (a throwaway server the test starts) with every job's id, state,
# result and attempt history; a daemon on PostgreSQL then finishes what was
# left; copying again is refused, --append skips the jobs already there.
# Skipped (exit 77) where the PostgreSQL server is not installed.
source "$(dirname "$0")/lib.sh"

if ! "$NIGHTSHIFT" --help 2>&1 | grep -q "migrate-queue"; then
  echo "skipped: this nightshift has no migrate-queue command (not registered in daemon/cli/main.cpp yet)"
  exit 77
fi
start_pg_server || {
  echo "skipped: $PG_SKIP"
  exit 77
}
URL=$PG_URL

make_model tiny.gguf
write_config tiny=tiny.gguf

# One night on SQLite: 20 jobs done, 10 more waiting, one of them cancelled.
for i in $(seq 1 20); do echo "Before the move, prompt $i"; done > "$WORK/done.txt"
for i in $(seq 1 10); do echo "Left for the fleet, prompt $i"; done > "$WORK/left.txt"
ns submit --config "$CONFIG" --model tiny --max-tokens 5 --ignore-eos --key night1 --prompt-lines "$WORK/done.txt" \
  > /dev/null
start_daemon --drain
wait_daemon 0
ns submit --config "$CONFIG" --model tiny --max-tokens 5 --ignore-eos --key night2 --prompt-lines "$WORK/left.txt" \
  > /dev/null
expect_exit 0 ns cancel --config "$CONFIG" 30
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" 20 "done on SQLite"

expect_exit 0 ns migrate-queue --from "$DB" --to "$URL"
expect_contains "$OUT" "copied 30 job(s)" "migrate-queue report"
expect_contains "$OUT" "(9 queued, 20 done, 1 cancelled)" "migrate-queue report by state"
expect_contains "$OUT" "with 20 result(s), 20 attempt record(s), 0 checkpoint(s)" "migrate-queue report of the rest"

# Row for row the same jobs, attempts and results.
same() {  # same WHAT SQL: the query gives the same rows on both databases
  sql "$2" > "$WORK/sqlite.out"
  pgq "$2" > "$WORK/pg.out"
  cmp -s "$WORK/sqlite.out" "$WORK/pg.out" || fail "$1 differ: $(diff "$WORK/sqlite.out" "$WORK/pg.out" | head -5)"
}
same "jobs" "SELECT id, state, model, prompt, idempotency_key, attempts, attempt, worker, created_ms, finished_ms
             FROM jobs ORDER BY id"
same "attempts" "SELECT job_id, attempt, worker, started_ms, ended_ms, outcome FROM attempts ORDER BY job_id, attempt"
# (Not the text itself: a random model writes bytes that are not UTF-8, which
# PostgreSQL stores as U+FFFD; the unit tests compare texts exactly.)
same "results" "SELECT job_id, prompt_tokens, completion_tokens, finish_reason,
                CASE WHEN decode_tok_s > 0 AND length(text) > 0 THEN 1 ELSE 0 END
                FROM results ORDER BY job_id"

# Again: refused, the target is not empty. --append: the target's record of
# this copy says every job is there, nothing is added.
expect_exit 1 ns migrate-queue --from "$DB" --to "$URL"
expect_contains "$OUT" "already holds 30 job(s)" "second migration refused"
expect_exit 0 ns migrate-queue --from "$DB" --to "$URL" --append
expect_contains "$OUT" "copied 0 job(s)" "append report"
expect_contains "$OUT" "30 job(s) up to job 30 of $DB were copied here by an earlier run" "append knows the copy"
expect_eq "$(pgq "SELECT count(*) FROM jobs")" 30 "jobs on PostgreSQL after --append"

# The fleet takes over: a daemon on PostgreSQL runs what was left; new ids continue after the copied ones.
new_id=$(ns submit --db "$URL" --model tiny --max-tokens 5 --ignore-eos "After the move")
expect_eq "$new_id" 31 "the first id submitted after the move"
"$NIGHTSHIFTD" --config "$CONFIG" --db "$URL" --drain > "$WORK/daemon-pg.log" 2>&1 &
DAEMON_PID=$!
wait_daemon 0
expect_eq "$(pgq "SELECT count(*) FROM jobs WHERE state = 'done'")" 30 "done on PostgreSQL"
expect_eq "$(pgq "SELECT count(*) FROM jobs WHERE state = 'cancelled' AND id = 30")" 1 "the cancelled job stays cancelled"
expect_eq "$(pgq "SELECT count(*) FROM attempts")" 30 "one attempt per job that ran"
echo "ok"
