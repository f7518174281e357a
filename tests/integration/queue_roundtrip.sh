# submit 3 jobs (argument, stdin, file; two priorities; an idempotency key),
# run `nightshiftd --drain`, check every row and what list/show print.
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
write_config tiny=tiny.gguf
echo "max_batch: 1" >> "$CONFIG"  # one job at a time: the claim order is visible in started_ms
echo "The third prompt, read from a file." > "$WORK/prompt.txt"

id1=$(ns submit --config "$CONFIG" --model tiny --max-tokens 6 --ignore-eos "First prompt")
id2=$(echo "Second prompt, from stdin" | ns submit --config "$CONFIG" --model tiny --max-tokens 7 --ignore-eos --priority 5 -)
id3=$(ns submit --config "$CONFIG" --model tiny --max-tokens 8 --ignore-eos --prompt-file "$WORK/prompt.txt" --key doc-3 --stop "never")
again=$(ns submit --config "$CONFIG" --model tiny --max-tokens 8 --ignore-eos --prompt-file "$WORK/prompt.txt" --key doc-3 --stop "never" 2>/dev/null)
expect_eq "$again" "$id3" "the same request under the same idempotency key returns the first job"
# (the key with other sampling values is refused: submit_checks.sh)
expect_eq "$(sql 'SELECT count(*) FROM jobs')" 3 "jobs queued"
expect_eq "$(sql "SELECT group_concat(state) FROM jobs")" "queued,queued,queued" "states before the daemon"
expect_eq "$(sql "SELECT prompt FROM jobs WHERE id = $id2")" "Second prompt, from stdin" "stdin prompt"
expect_eq "$(sql "SELECT prompt FROM jobs WHERE id = $id3")" "The third prompt, read from a file." "file prompt"
expect_eq "$(sql "SELECT stop FROM jobs WHERE id = $id3")" '["never"]' "stop strings as JSON"

# The env var is the fallback when neither --db nor --config is given.
expect_eq "$(NIGHTSHIFT_DB="$DB" ns list --json | grep -c '"state": "queued"')" 3 "list via NIGHTSHIFT_DB"

start_daemon --drain
wait_daemon 0

expect_eq "$(sql "SELECT group_concat(state) FROM jobs")" "done,done,done" "states after --drain"
# Priority 5 first, then oldest first.
expect_eq "$(sql "SELECT group_concat(id) FROM (SELECT id FROM jobs ORDER BY started_ms, id)")" "$id2,$id1,$id3" \
  "claim order"
expect_eq "$(sql "SELECT group_concat(completion_tokens) FROM results ORDER BY job_id")" "6,7,8" "completion tokens"
expect_eq "$(sql "SELECT count(*) FROM results WHERE length(text) > 0 AND finish_reason = 'length'
                  AND prompt_tokens > 0 AND prefill_ms > 0 AND decode_ms > 0 AND decode_tok_s > 0
                  AND prefill_tok_s > 0 AND peak_rss_bytes > 0 AND queue_wait_ms >= 0")" 3 "result stats"
expect_eq "$(sql "SELECT count(*) FROM jobs j JOIN results r ON r.job_id = j.id
                  WHERE r.queue_wait_ms = j.started_ms - j.created_ms")" 3 "queue_wait = started - created"
expect_eq "$(sql "SELECT count(*) FROM results WHERE load_ms > 0")" 1 "the model is loaded once"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE worker LIKE '%:%' AND attempts = 1 AND finished_at LIKE '____-__-__T__:__:__.___Z'")" 3 \
  "worker, attempts and ISO times"
expect_eq "$(sql "SELECT count(*) FROM job_summary WHERE state = 'done' AND tokens > 0 AND output IS NOT NULL")" 3 \
  "job_summary view"

# What people and scripts see.
show=$(ns show "$id2" --db "$DB" --json)
expect_contains "$show" '"state": "done"' "show --json state"
expect_contains "$show" '"completion_tokens": 7' "show --json tokens"
expect_contains "$show" '"priority": 5' "show --json priority"
human=$(ns show "$id3" --config "$CONFIG")
expect_contains "$human" "job $id3: done" "show header"
expect_contains "$human" "idempotency_key  doc-3" "show key"
expect_contains "$human" "--- output ---" "show output"
table=$(ns list --config "$CONFIG" --state done --limit 2)
expect_eq "$(echo "$table" | grep -cE '^[0-9]+ +done ')" 2 "list --state done --limit 2"
expect_contains "$table" "queued 0, running 0, done 3, failed 0, cancelled 0" "list counts"

# Exit codes scripts rely on.
expect_exit 3 ns show 999 --db "$DB"
expect_exit 2 ns list --db "$DB" --state finished
expect_exit 4 ns submit --db "$DB" --model tiny --temperature -1 "bad temperature"
expect_contains "$OUT" "temperature" "invalid sampling message"
expect_exit 2 ns submit --db "$DB" --model tiny
expect_exit 1 ns list --db "$WORK/no-such.db"
[[ ! -e "$WORK/no-such.db" ]] || fail "list created a database at a mistyped path"
expect_eq "$(sql 'SELECT count(*) FROM jobs')" 3 "rejected submits add no rows"
echo "ok"
