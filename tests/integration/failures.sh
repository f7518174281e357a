# Jobs that cannot run end `failed` with a clear error; a job whose model the
# daemon cannot serve (a name or a path the config gets wrong, a file cut
# short: a copy in progress) stays queued;
# the others still finish and the daemon exits 0. Bad input at the CLI is
# refused with exit 4 before anything is queued.
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
head -c 2000 "$WORK/tiny.gguf" > "$WORK/cut.gguf"  # a copy in progress, or a cut-off download
# A whole file with an impossible header (GGUF version 99 at byte 4).
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[4:8] = (99).to_bytes(4, "little"); open(sys.argv[2], "wb").write(b)' \
  "$WORK/tiny.gguf" "$WORK/corrupt.gguf"
printf 'not a model at all\n' > "$WORK/text.gguf"
write_config tiny=tiny.gguf missing=nowhere/missing.gguf corrupt=corrupt.gguf text=text.gguf cut=cut.gguf

good1=$(ns submit --config "$CONFIG" --model tiny --max-tokens 4 "before the failures")
unknown=$(ns submit --config "$CONFIG" --model no-such-model --any-model --max-tokens 4 "x")
# (--any-model: submit --config refuses a missing file; a daemon on another machine's config would not)
missing=$(ns submit --config "$CONFIG" --model missing --any-model --max-tokens 4 "x")
corrupt=$(ns submit --config "$CONFIG" --model corrupt --max-tokens 4 "x")
text=$(ns submit --config "$CONFIG" --model text --max-tokens 4 "x")
cut=$(ns submit --config "$CONFIG" --model cut --max-tokens 4 "x")
good2=$(ns submit --config "$CONFIG" --model tiny --max-tokens 4 "after the failures")

# Logging as under systemd: JOURNAL_STREAM names the log's inode, so lines
# carry a syslog priority prefix and no timestamp.
: > "$WORK/daemon.log"
JOURNAL_STREAM=$(stat -c '%d:%i' "$WORK/daemon.log") start_daemon --drain
wait_daemon 3  # jobs of models it cannot serve were left queued: the drain says so in its exit status

expect_eq "$(job_state "$good1"),$(job_state "$good2")" "done,done" "good jobs"
# A model the config lacks is the daemon's mistake, not the job's: it stays
# queued (tests/integration/daemon_config.sh), its attempt given back.
expect_eq "$(sql "SELECT state || ',' || attempts FROM jobs WHERE id = $unknown")" "queued,0" "unknown model: left queued"
expect_contains "$(sql "SELECT error FROM attempts WHERE job_id = $unknown")" \
  "model 'no-such-model' is not in the daemon's config" "unknown model message"
# So does a job whose model's file is missing (a typo in the path, a disk mounted late): issue 30, E.
expect_eq "$(sql "SELECT state || ',' || attempts FROM jobs WHERE id = $missing")" "queued,0" \
  "a missing model file leaves its job queued"
expect_contains "$(sql "SELECT error FROM attempts WHERE job_id = $missing")" "nowhere/missing.gguf" \
  "missing file message"
expect_contains "$(sql "SELECT error FROM attempts WHERE job_id = $missing")" "its jobs stay queued" \
  "the message says the job is kept"
# And a file shorter than its own header says (issue 30, E: a half-copied file was failed as bad_model).
expect_eq "$(sql "SELECT state || ',' || attempts FROM jobs WHERE id = $cut")" "queued,0" \
  "a file cut short leaves its job queued"
expect_contains "$(sql "SELECT error FROM attempts WHERE job_id = $cut")" "incomplete GGUF" "cut file message"
expect_eq "$(sql "SELECT count(*) FROM attempts WHERE job_id IN ($corrupt, $text)")" 2 \
  "permanent failures are not retried"
expect_eq "$(sql "SELECT error_kind FROM jobs WHERE id = $corrupt")" "bad_model" "corrupt file kind"
expect_contains "$(sql "SELECT error FROM jobs WHERE id = $corrupt")" "unsupported GGUF version 99" \
  "corrupt file message"
expect_eq "$(sql "SELECT error_kind FROM jobs WHERE id = $text")" "bad_model" "non-GGUF file kind"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'failed' AND finished_ms IS NOT NULL")" 2 "failed rows"
expect_eq "$(sql "SELECT count(*) FROM results")" 2 "no result rows for failed jobs"
expect_eq "$(sql "SELECT count(*) FROM job_summary WHERE error LIKE 'bad_model: %'")" 2 "errors in job_summary"
expect_contains "$(cat "$WORK/daemon.log")" "<4>warning: job $corrupt failed (bad_model)" "failure logged"
expect_contains "$(cat "$WORK/daemon.log")" "<6>info: job $good2 done" "success logged"
grep -q '^\[20' "$WORK/daemon.log" && fail "journal lines must not carry timestamps"
expect_contains "$(cat "$WORK/daemon.log")" "model missing: file" "missing model warned at start-up"

# The history is shown; `nightshift retry` queues failed/dead jobs again as new.
history=$(ns show "$corrupt" --config "$CONFIG")
expect_contains "$history" "--- attempts ---" "show prints the attempts"
expect_contains "$history" "#1 " "show lists each attempt"
mkdir -p "$WORK/nowhere" && cp "$WORK/tiny.gguf" "$WORK/nowhere/missing.gguf"  # the disk is back
cp "$WORK/tiny.gguf" "$WORK/cut.gguf"  # the copy finished
expect_exit 0 ns retry "$corrupt" --config "$CONFIG"
expect_contains "$OUT" "job $corrupt queued again" "retry message"
expect_eq "$(sql "SELECT state || ',' || attempts || ',' || ifnull(error, 'null') FROM jobs WHERE id = $corrupt")" \
  "queued,0,null" "a retried job starts over"
expect_exit 1 ns retry "$good1" --config "$CONFIG"
expect_contains "$OUT" "job $good1 is done; only failed, dead or cancelled jobs can be retried" "retry of a done job"
expect_exit 3 ns retry 999 --config "$CONFIG"
start_daemon --drain
wait_daemon 3  # the unknown model's job is still held
expect_eq "$(job_state "$missing"),$(job_state "$cut"),$(job_state "$corrupt")" "done,done,failed" \
  "the held jobs run once their files are there"
expect_eq "$(sql "SELECT count(*) FROM attempts WHERE job_id = $corrupt")" 2 "the history keeps the old attempts"

# Bad input at submit: refused with exit 4 and the reason; nothing is queued.
before=$(sql "SELECT count(*) FROM jobs")
expect_exit 4 ns submit --config "$CONFIG" --model tiny ""
printf '' > "$WORK/empty.txt"
expect_exit 4 ns submit --config "$CONFIG" --model tiny --prompt-file "$WORK/empty.txt"
expect_contains "$OUT" "prompt is empty" "empty prompt"
printf 'caf\xe9 au lait' > "$WORK/latin1.txt"
expect_exit 4 ns submit --config "$CONFIG" --model tiny --prompt-file "$WORK/latin1.txt"
expect_contains "$OUT" "not valid UTF-8 (bad byte sequence at byte 3)" "invalid UTF-8 prompt"
head -c $((8 * 1024 * 1024 + 1)) /dev/zero | tr '\0' 'x' > "$WORK/huge.txt"
expect_exit 4 ns submit --config "$CONFIG" --model tiny --prompt-file "$WORK/huge.txt"
expect_contains "$OUT" "at most 8388608 bytes" "oversized prompt"
expect_exit 4 ns submit --config "$CONFIG" --model tiny --top-p 0 "x"
expect_contains "$OUT" "top_p" "top_p 0"
expect_exit 4 ns submit --config "$CONFIG" --model tiny --temperature nan "x"
expect_contains "$OUT" "temperature" "NaN temperature"
expect_exit 4 ns submit --config "$CONFIG" --model tiny --max-attempts 0 "x"
expect_contains "$OUT" "max_attempts = 0" "max attempts 0"
printf 'fine\n\xff\n' > "$WORK/lines.txt"
expect_exit 4 ns submit --config "$CONFIG" --model tiny --prompt-lines "$WORK/lines.txt"
expect_contains "$OUT" "line 2: the prompt is not valid UTF-8" "a bad line in --prompt-lines"
expect_eq "$(sql "SELECT count(*) FROM jobs")" "$before" "rejected submits add no rows"

# A bad config stops the daemon before it touches the queue, naming the line.
printf 'models: {}\nthreads: 2\nmodel_dir: /srv\n' > "$WORK/bad.yaml"
expect_exit 2 "$NIGHTSHIFTD" --config "$WORK/bad.yaml" --drain
expect_contains "$OUT" "bad.yaml:3: unknown key 'model_dir'" "config error with line number"
expect_exit 2 "$NIGHTSHIFTD" --drain
printf 'lease_ms: soon\n' > "$WORK/bad2.yaml"
expect_exit 2 "$NIGHTSHIFTD" --config "$WORK/bad2.yaml" --drain
expect_contains "$OUT" "bad2.yaml:1: lease_ms must be an integer, got 'soon'" "wrong type with line number"
echo "ok"
