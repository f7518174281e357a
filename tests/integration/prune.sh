# nightshift prune deletes old finished jobs with their attempts and results
# in one transaction, never a queued or running job, and is safe while the
# daemon runs.
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
write_config tiny=tiny.gguf
old_done=$(ns submit --config "$CONFIG" --model tiny --max-tokens 2 --ignore-eos "old and done")
old_failed=$(ns submit --config "$CONFIG" --model tiny --max-tokens 2 --ignore-eos --temperature 0 "old and failed")
new_done=$(ns submit --config "$CONFIG" --model tiny --max-tokens 2 --ignore-eos "recent")
start_daemon --drain
wait_daemon 0
# Age them by hand: 40 days ago.
forty_days=$((40 * 86400 * 1000))
sql "UPDATE jobs SET state = 'failed', error_kind = 'invalid_input', error = 'x' WHERE id = $old_failed;
     UPDATE jobs SET finished_ms = finished_ms - $forty_days, created_ms = created_ms - $forty_days
       WHERE id IN ($old_done, $old_failed)"
old_queued=$(ns submit --config "$CONFIG" --model tiny --max-tokens 2 --ignore-eos --priority -5 "queued long ago")
sql "UPDATE jobs SET created_ms = created_ms - $forty_days WHERE id = $old_queued"
expect_eq "$(sql "SELECT count(*) FROM attempts WHERE job_id = $old_done") $(sql "SELECT count(*) FROM results WHERE job_id = $old_done")" \
  "1 1" "the old job has an attempt and a result before the prune"

# The daemon runs (idle, polling) while the prune deletes.
write_config tiny=tiny.gguf
echo "claim_models: configured" >> "$CONFIG"
sed -i 's/^  tiny: tiny.gguf$/  other: tiny.gguf/' "$CONFIG"  # it claims nothing: the queued job stays queued
start_daemon
wait_for 10 "the daemon to be ready" grep -q "ready:" "$WORK/daemon.log"
expect_exit 0 ns prune --config "$CONFIG" --older-than 30d --state done
expect_contains "$OUT" "deleted 1 job(s) (done)" "prune --state done"
expect_eq "$(sql "SELECT group_concat(id) FROM jobs ORDER BY id")" "$old_failed,$new_done,$old_queued" \
  "only the old done job went"
expect_eq "$(sql "SELECT (SELECT count(*) FROM attempts WHERE job_id = $old_done) + (SELECT count(*) FROM results WHERE job_id = $old_done)")" \
  0 "its attempts and result went with it"
expect_exit 0 ns prune --config "$CONFIG" --older-than 30d
expect_contains "$OUT" "deleted 1 job(s) (done, failed, cancelled, dead)" "prune of every final state"
expect_eq "$(sql "SELECT group_concat(id) FROM jobs ORDER BY id")" "$new_done,$old_queued" \
  "a queued job is never pruned, however old"
expect_exit 0 ns prune --config "$CONFIG" --older-than 0s --state done
expect_eq "$(sql "SELECT group_concat(id) FROM jobs ORDER BY id")" "$old_queued" "--older-than 0s takes every done job"
expect_exit 2 ns prune --config "$CONFIG" --older-than soon
expect_contains "$OUT" "--older-than takes a whole number of weeks, days" "a bad age is named"
expect_exit 2 ns prune --config "$CONFIG" --older-than 1d --state queued
# #31: `--older-than 1m` deleted a minute's jobs; a bare number, and w for weeks.
expect_exit 2 ns prune --config "$CONFIG" --older-than 1m
expect_contains "$OUT" "--older-than 1m is ambiguous: minutes are 1min; a month is about 30d" "m is refused"
expect_exit 2 ns prune --config "$CONFIG" --older-than 30
expect_contains "$OUT" "--older-than 30 has no unit" "a bare number is refused"
expect_contains "$OUT" "did you mean 30d?" "with a hint"
expect_exit 0 ns prune --config "$CONFIG" --older-than 1w
expect_contains "$OUT" "deleted 0 job(s)" "weeks"

# --dry-run counts; more than 20 jobs need --yes off a terminal (a question on one).
seq 1 25 | sed 's/^/prompt /' > "$WORK/many.txt"
many=$(ns submit --config "$CONFIG" --model tiny --any-model --prompt-lines "$WORK/many.txt")
expect_exit 0 ns cancel --config "$CONFIG" $many
expect_exit 0 ns prune --config "$CONFIG" --older-than 0s --dry-run
expect_contains "$OUT" "would delete 25 job(s) (done, failed, cancelled, dead)" "--dry-run counts"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'cancelled'")" 25 "--dry-run deletes nothing"
expect_exit 2 ns prune --config "$CONFIG" --older-than 0s < /dev/null
expect_contains "$OUT" "would delete 25 job(s)" "the count is named"
expect_contains "$OUT" "add --yes" "and the flag"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'cancelled'")" 25 "refused: nothing deleted"
if command -v script > /dev/null; then
  asked=$(echo n | script -qec "'$NIGHTSHIFT' prune --config '$CONFIG' --older-than 0s" /dev/null)
  expect_contains "$asked" "delete 25 job(s)" "a terminal is asked"
  expect_contains "$asked" "nothing deleted" "and no is no"
  expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'cancelled'")" 25 "declined: nothing deleted"
fi
expect_exit 0 ns prune --config "$CONFIG" --older-than 0s --yes
expect_contains "$OUT" "deleted 25 job(s)" "--yes deletes"
expect_eq "$(sql "PRAGMA integrity_check")" ok "the database after pruning"
expect_eq "$(sql "PRAGMA foreign_key_check")" "" "no rows left pointing at a deleted job"
kill -TERM "$DAEMON_PID"
wait_daemon 0
echo "ok"
