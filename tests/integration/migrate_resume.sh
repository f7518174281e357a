# migrate-queue is exactly-once and resumable (issue 19: `--append` twice
# copied 273 jobs for 214; a cut-off copy left no trace). 214 jobs without
# idempotency keys are copied in pages of 10:
#  - SQLite into a SQLite queue that has jobs of its own (--append): a row the
#    target refuses cuts the copy off (reported, with how to finish); then the
#    process is killed (-9) inside a page, at a state the test waits for (a
#    trigger makes that page's insert spin forever once three pages have
#    committed); running the command again says it resumes and copies the
#    rest; running it once more copies nothing. Every prompt is there once.
#  - SQLite into an empty PostgreSQL queue (the jobs keep their ids): killed
#    while the server holds a page's insert (pg_sleep in a trigger, seen in
#    pg_stat_activity); the rerun resumes under the same ids. Skipped (with a
#    message) where the PostgreSQL server is not installed.
source "$(dirname "$0")/lib.sh"

SRC="$WORK/old.db"
for i in $(seq 1 214); do echo "prompt $i"; done > "$WORK/prompts.txt"
ns submit --db "$SRC" --model tiny --max-tokens 5 --prompt-lines "$WORK/prompts.txt" > /dev/null
for i in 1 2 3 4 5; do ns submit --db "$DB" --model tiny "the target's own job $i" > /dev/null; done
expect_eq "$(sql "SELECT count(*) FROM jobs")" 5 "the target's own jobs"

migrate() { ns migrate-queue --from "$SRC" --page 10 "$@"; }
copies_once() {  # copies_once QUERY_FUNCTION N WHAT: the N source prompts, each exactly once
  expect_eq "$($1 "SELECT count(*) FROM jobs WHERE prompt LIKE 'prompt %'")" "$2" "$3: copied jobs"
  expect_eq "$($1 "SELECT count(DISTINCT prompt) FROM jobs WHERE prompt LIKE 'prompt %'")" "$2" "$3: distinct prompts"
}

# 1. A row refused in the third page: pages 1 and 2 stay, the report says so.
sql "CREATE TRIGGER refuse BEFORE INSERT ON jobs WHEN NEW.prompt = 'prompt 25'
     BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
expect_exit 1 migrate --to "$DB" --append
expect_contains "$OUT" "refused by the test" "the cause"
expect_contains "$OUT" "the copy is cut off: the 20 job(s) copied by this run stay in $DB, nothing from job 21 on" \
  "a cut-off copy says so"
expect_contains "$OUT" "Run the same command again" "and how to finish it"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 25 "two pages copied"
expect_eq "$(sql "SELECT last_source_id || ',' || copied || ',' || coalesce(finished_ms, 'open')
                  FROM queue_migrations")" "20,20,open" "the mark after the refusal"
sql "DROP TRIGGER refuse"

# 2. Killed inside a page: the fourth page's insert of 'prompt 31' never
# returns (a cross join of 10^10 rows), so once three pages have committed
# the process is inside page 4 until it is killed.
sql "CREATE TABLE stall (x INTEGER);
     WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) INSERT INTO stall SELECT i FROM n;
     CREATE TRIGGER stall BEFORE INSERT ON jobs WHEN NEW.prompt = 'prompt 31'
     BEGIN SELECT count(*) FROM stall a, stall b, stall c, stall d, stall e; END;"
"$NIGHTSHIFT" migrate-queue --from "$SRC" --page 10 --to "$DB" --append > "$WORK/killed.out" 2>&1 &  # its own pid
pid=$!
EXTRA_PIDS+=("$pid")
resumed_to_30() { [[ "$(sql "SELECT last_source_id FROM queue_migrations")" == 30 ]]; }
wait_for 30 "the resumed copy to commit up to source job 30" resumed_to_30
kill -0 "$pid" 2> /dev/null || fail "migrate-queue ended before it was killed: $(cat "$WORK/killed.out")"
kill -KILL "$pid"
wait "$pid" 2> /dev/null || true
expect_eq "$(sql "SELECT count(*) FROM jobs")" 35 "jobs after kill -9: whole pages only"
sql "DROP TRIGGER stall; DROP TABLE stall"

# 3. Run again: it says it resumes, and copies the rest once.
expect_exit 0 migrate --to "$DB" --append
expect_contains "$OUT" "resuming the copy of $SRC" "the rerun names the cut-off copy"
expect_contains "$OUT" "cut off after job 30 of the source (30 job(s) copied)" "and where it stopped"
expect_contains "$OUT" "copied 184 job(s)" "the rest"
copies_once sql 214 "SQLite, resumed"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 219 "the target's jobs and the copies"

# 4. Once more (the issue's 273 for 214): nothing is copied twice; without --append it is refused.
expect_exit 0 migrate --to "$DB" --append
expect_contains "$OUT" "214 job(s) up to job 214 of $SRC were copied here by an earlier run" "a finished copy"
expect_contains "$OUT" "copied 0 job(s)" "nothing again"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 219 "no duplicates"
expect_exit 1 migrate --to "$DB"
expect_contains "$OUT" "already holds 219 job(s) (the copy of $SRC finished" "a second full copy is refused"
# A job submitted to the source since is all a later --append copies.
ns submit --db "$SRC" --model tiny "prompt 215" > /dev/null
expect_exit 0 migrate --to "$DB" --append
expect_contains "$OUT" "copied 1 job(s)" "only the new job"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 220 "the new job, once"

# 5. PostgreSQL, keeping ids, killed while the server holds a page.
start_pg_server || {
  echo "ok (SQLite); PostgreSQL skipped: $PG_SKIP"
  exit 0
}
URL=$PG_URL
expect_exit 0 ns list --db "$URL"  # creates the schema
pgq "CREATE FUNCTION stall() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN PERFORM pg_sleep(3600); RETURN NEW; END \$\$;
     CREATE TRIGGER stall BEFORE INSERT ON jobs FOR EACH ROW WHEN (NEW.prompt = 'prompt 31') EXECUTE FUNCTION stall()"
"$NIGHTSHIFT" migrate-queue --from "$SRC" --page 10 --to "$URL" > "$WORK/killed-pg.out" 2>&1 &
pid=$!
EXTRA_PIDS+=("$pid")
held() { [[ "$(pgq "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'")" == 1 ]]; }
wait_for 30 "the server to hold the fourth page" held
kill -KILL "$pid"
wait "$pid" 2> /dev/null || true
# The server notices the lost client only when it next talks to it: end its session (the page rolls back).
pgq "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'PgSleep'" > /dev/null
gone() {
  [[ "$(pgq "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")" == 0 ]]
}
wait_for 30 "the killed session to end" gone
expect_eq "$(pgq "SELECT count(*) || ',' || max(id) FROM jobs")" "30,30" "PostgreSQL after kill -9: three pages"
pgq "DROP TRIGGER stall ON jobs"
expect_exit 0 migrate --to "$URL"
expect_contains "$OUT" "resuming the copy of $SRC" "the PostgreSQL rerun resumes"
expect_contains "$OUT" "copied 185 job(s)" "the rest (215 in the source now)"
copies_once pgq 215 "PostgreSQL, resumed"
sql_src() { "$SQLITE3" "$SRC" "$1"; }
[[ "$(sql_src "SELECT id || ' ' || prompt FROM jobs ORDER BY id")" == "$(pgq "SELECT id || ' ' || prompt FROM jobs ORDER BY id")" ]] ||
  fail "the ids differ between the source and PostgreSQL"
expect_eq "$(ns submit --db "$URL" --model tiny "after the move")" 216 "the first id submitted after the move"
echo "ok"
