# Jobs that cannot run end `failed` with a clear error; the others still finish
# and the daemon exits 0.
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
head -c 2000 "$WORK/tiny.gguf" > "$WORK/corrupt.gguf"
printf 'not a model at all\n' > "$WORK/text.gguf"
write_config tiny=tiny.gguf missing=nowhere/missing.gguf corrupt=corrupt.gguf text=text.gguf

good1=$(ns submit --config "$CONFIG" --model tiny --max-tokens 4 "before the failures")
unknown=$(ns submit --config "$CONFIG" --model no-such-model --max-tokens 4 "x")
missing=$(ns submit --config "$CONFIG" --model missing --max-tokens 4 "x")
corrupt=$(ns submit --config "$CONFIG" --model corrupt --max-tokens 4 "x")
text=$(ns submit --config "$CONFIG" --model text --max-tokens 4 "x")
good2=$(ns submit --config "$CONFIG" --model tiny --max-tokens 4 "after the failures")

# Logging as under systemd: JOURNAL_STREAM names the log's inode, so lines
# carry a syslog priority prefix and no timestamp.
: > "$WORK/daemon.log"
JOURNAL_STREAM=$(stat -c '%d:%i' "$WORK/daemon.log") start_daemon --drain
wait_daemon 0

expect_eq "$(job_state "$good1"),$(job_state "$good2")" "done,done" "good jobs"
expect_eq "$(sql "SELECT error_kind FROM jobs WHERE id = $unknown")" "invalid_input" "unknown model kind"
expect_contains "$(sql "SELECT error FROM jobs WHERE id = $unknown")" "model 'no-such-model' is not in the daemon's config" \
  "unknown model message"
expect_eq "$(sql "SELECT error_kind FROM jobs WHERE id = $missing")" "io" "missing file kind"
expect_contains "$(sql "SELECT error FROM jobs WHERE id = $missing")" "nowhere/missing.gguf" "missing file message"
expect_eq "$(sql "SELECT error_kind FROM jobs WHERE id = $corrupt")" "bad_model" "truncated file kind"
expect_contains "$(sql "SELECT error FROM jobs WHERE id = $corrupt")" "corrupt.gguf" "truncated file message"
expect_eq "$(sql "SELECT error_kind FROM jobs WHERE id = $text")" "bad_model" "non-GGUF file kind"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'failed' AND finished_ms IS NOT NULL")" 4 "failed rows"
expect_eq "$(sql "SELECT count(*) FROM results")" 2 "no result rows for failed jobs"
expect_eq "$(sql "SELECT count(*) FROM job_summary WHERE error LIKE 'bad_model: %'")" 2 "errors in job_summary"
expect_contains "$(cat "$WORK/daemon.log")" "<4>warning: job $corrupt failed (bad_model)" "failure logged"
expect_contains "$(cat "$WORK/daemon.log")" "<6>info: job $good2 done" "success logged"
grep -q '^\[20' "$WORK/daemon.log" && fail "journal lines must not carry timestamps"
expect_contains "$(cat "$WORK/daemon.log")" "model missing: file" "missing model warned at start-up"

# A bad config stops the daemon before it touches the queue, naming the line.
printf 'models: {}\nthreads: 2\nmodel_dir: /srv\n' > "$WORK/bad.yaml"
expect_exit 2 "$NIGHTSHIFTD" --config "$WORK/bad.yaml" --drain
expect_contains "$OUT" "bad.yaml:3: unknown key 'model_dir'" "config error with line number"
expect_exit 2 "$NIGHTSHIFTD" --drain
echo "ok"
