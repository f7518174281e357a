# Prefix sharing through the daemon: a JSONL batch of 12 jobs with one long
# system prompt and a short document each runs with max_batch 8 (the first 8
# join together, the last 4 after them, from the kept snapshot). Checked in the database: 11 jobs copied
# the shared prompt tokens (results.prefix_tokens, the same count each) and
# one computed them; `nightshift show` says so; the daemon's batch line counts
# the shared part prefilled once. The same batch with `prefix_cache: 0` in a
# second queue gives every job the same text.
source "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || { echo "SKIP: python3 is needed to write the batch"; exit 77; }

make_model m.gguf --n-expert 8 --n-expert-used 2
write_config m=m.gguf
{
  echo "max_batch: 8"
  echo "log_level: debug"
} >> "$CONFIG"
sed -e 's/^database: q.db/database: off.db/' "$CONFIG" > "$WORK/off.yaml"
echo "prefix_cache: 0" >> "$WORK/off.yaml"

python3 - "$WORK/requests.jsonl" <<'PY'
import json, sys
system = ("You summarise field reports for the night shift. Keep the writer's tone, name the section you rely on, "
          "never invent figures, and end with one open question. ") * 3
with open(sys.argv[1], "w") as out:
    for i in range(12):
        body = {"model": "m", "prompt": system + f"\nReport {i}: the pump at site {i * 7} ran {i + 2} hours.\nSummary:",
                "max_tokens": 10, "temperature": 0.8, "seed": 100 + i, "ignore_eos": True}
        out.write(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions", "body": body}) + "\n")
PY

done_count() { [[ "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" == 12 ]]; }

ns submit --config "$CONFIG" --jsonl "$WORK/requests.jsonl" > /dev/null
start_daemon --drain
wait_for 120 "the 12 jobs to finish" done_count
wait_daemon 0

# One job prefilled the shared part, the 11 others copied it: the same number of tokens each.
expect_eq "$(sql "SELECT count(*) FROM results WHERE prefix_tokens = 0")" 1 "one job computed the shared prefix"
expect_eq "$(sql "SELECT count(DISTINCT prefix_tokens) FROM results WHERE prefix_tokens > 0")" 1 \
  "the other jobs copied the same prefix"
shared=$(sql "SELECT max(prefix_tokens) FROM results")
expect_eq "$(sql "SELECT count(*) FROM results WHERE prefix_tokens = $shared")" 11 "11 jobs reused the shared tokens"
(( shared >= 32 && shared % 16 == 0 )) || fail "shared prefix of $shared tokens (want a multiple of 16, at least 32)"
expect_eq "$(sql "SELECT count(*) FROM results WHERE prefix_tokens >= prompt_tokens")" 0 \
  "every job computed at least its last prompt token"
# The batch lines (one each time the batch empties; the snapshot outlives them): prompt tokens prefilled =
# all prompts less the 11 copies.
total=$(sql "SELECT sum(prompt_tokens) FROM results")
sums=$(sed -nE 's/.*batch run: .*; ([0-9]+) prompt tokens prefilled, ([0-9]+) copied from shared prefixes$/\1 \2/p' \
  "$WORK/daemon.log" | awk '{p += $1; c += $2} END {print p, c}')
expect_eq "$sums" "$((total - 11 * shared)) $((11 * shared))" "the batch totals count the shared part once"
id=$(sql "SELECT job_id FROM results WHERE prefix_tokens > 0 LIMIT 1")
expect_contains "$(ns show --config "$CONFIG" "$id")" "prefix_shared" "show names the copied prefix"
expect_contains "$(ns show --config "$CONFIG" --json "$id")" "\"prefix_tokens\": $shared" "show --json has the column"

# The same batch without prefix sharing: the same text for every job, nothing copied.
ns submit --config "$WORK/off.yaml" --jsonl "$WORK/requests.jsonl" > /dev/null
"$NIGHTSHIFTD" --config "$WORK/off.yaml" --drain > "$WORK/daemon_off.log" 2>&1 || fail "the daemon without sharing failed"
DB="$WORK/off.db"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" 12 "every job done without sharing"
expect_eq "$(sql "SELECT sum(prefix_tokens) FROM results")" 0 "nothing copied with prefix_cache 0"
sql "SELECT j.custom_id || ' ' || hex(r.text) FROM jobs j JOIN results r ON r.job_id = j.id ORDER BY j.custom_id" > "$WORK/off.txt"
DB="$WORK/q.db"
sql "SELECT j.custom_id || ' ' || hex(r.text) FROM jobs j JOIN results r ON r.job_id = j.id ORDER BY j.custom_id" > "$WORK/on.txt"
expect_eq "$(wc -l < "$WORK/on.txt")" 12 "12 outputs"
cmp -s "$WORK/on.txt" "$WORK/off.txt" || fail "outputs differ with prefix sharing: $(diff "$WORK/on.txt" "$WORK/off.txt")"
echo "OK: 11 of 12 jobs copied $shared shared prompt tokens; outputs equal the run without sharing"
