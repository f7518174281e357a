# The scripted bad night of issue 31: one batch meets four causes at once: jobs
# submitted under a mistyped model name, a model whose disk is not mounted, a
# split model with a damaged shard, and a daemon killed with kill -9 in the
# middle of a job. Each cause is visible in `status` and recovered with at
# most one command (or the one file operation that is the fix); re-pointing
# the typo's jobs moves nothing else; the killed job resumes and its text
# equals an uninterrupted run's; every job ends done, once.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_split.sh"  # the ds2 shape

make_model chat.gguf
make_model slow.gguf --n-embd 256 --n-layer 8 --n-ff 768 --n-ctx 4096
mkdir -p "$WORK/big" "$WORK/pristine"
"$MAKE_MODEL" --out "$WORK/big/m.gguf" --seed 1 "${ds2[@]}" --split-max-tensors 9 > /dev/null
shards=("$WORK/big"/m-000*-of-*.gguf)
((${#shards[@]} >= 3)) || fail "only ${#shards[@]} shards"
cp "${shards[@]}" "$WORK/pristine/"
# The damage: a shard whose header says GGUF version 99 (a bad disk block, a wrong file copied over it).
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[4:8] = (99).to_bytes(4, "little"); open(sys.argv[1], "wb").write(b)' \
  "${shards[1]}"
write_config chat=chat.gguf slow=slow.gguf docs=archive/docs.gguf "big=big/$(basename "${shards[0]}")"
{
  echo "lease_ms: 1000"
  echo "checkpoint_tokens: 16"
  echo "checkpoint_interval_ms: 0"
} >> "$CONFIG"

# The night's batch, an OpenAI Batch file (--any-model: written for a config that has "chta" and "docs").
prompt="The lighthouse keeper wrote in his log that night"
line() {  # line CUSTOM_ID MODEL MAX_TOKENS PROMPT
  printf '{"custom_id": "%s", "method": "POST", "url": "/v1/completions", "body": {"model": "%s", "prompt": "%s", "max_tokens": %d, "temperature": 0, "ignore_eos": true}}\n' \
    "$1" "$2" "$4" "$3"
}
{
  line long slow 300 "$prompt"
  line good chat 6 "a job that is fine"
  line typo1 chta 6 "first under a typo"
  line typo2 chta 6 "second under a typo"
  line docs docs 6 "a model on a disk not mounted"
  line big big 6 "a model with a damaged shard"
} > "$WORK/nightly.jsonl"
expect_exit 0 ns submit --config "$CONFIG" --jsonl "$WORK/nightly.jsonl" --any-model
id_of() { sql "SELECT id FROM jobs WHERE custom_id = '$1'"; }
long=$(id_of long) good=$(id_of good) typo1=$(id_of typo1) typo2=$(id_of typo2) docs=$(id_of docs) big=$(id_of big)

# Cause 4: the daemon is killed in the middle of the long job.
start_daemon
checkpointed() { (($(sql "SELECT ifnull((SELECT token_count FROM checkpoints WHERE job_id = $long), 0)") >= 32)); }
wait_for 60 "job $long to checkpoint 32 tokens" checkpointed
{ kill -KILL "$DAEMON_PID" && wait "$DAEMON_PID"; } 2> /dev/null || true
DAEMON_PID=""
at_kill=$(sql "SELECT token_count FROM checkpoints WHERE job_id = $long")
((at_kill < 300)) || fail "the long job finished before the kill"

# The morning: one drain serves what it can and says what it could not (exit 3: held jobs remain).
start_daemon --drain
wait_daemon 3
expect_eq "$(job_state "$good"),$(job_state "$long")" "done,done" "the jobs nothing stopped, and the killed one"
expect_contains "$(cat "$WORK/daemon.log")" "resuming from $at_kill checkpointed tokens" "the killed job resumed"
expect_eq "$(sql "SELECT group_concat(outcome, ' ') FROM (SELECT outcome FROM attempts WHERE job_id = $long ORDER BY attempt)")" \
  "lease_expired done" "the kill is in the long job's history"
expect_eq "$(job_state "$typo1"),$(job_state "$typo2"),$(job_state "$docs")" "queued,queued,queued" \
  "jobs the daemon cannot serve are held, not failed"
expect_eq "$(job_state "$big")" "failed" "the job on the damaged file failed"
status=$(ns status --config "$CONFIG")
expect_contains "$status" "model 'chta' is not in the daemon's config" "status says why the typo's jobs wait"
expect_contains "$status" "archive/docs.gguf" "status names the missing file"
expect_contains "$(ns list --config "$CONFIG" --batch nightly --state failed)" "bad_model" "list says why the job failed"
expect_contains "$(ns show "$big" --config "$CONFIG")" "unsupported GGUF version 99" "show names the damage"

# Fix 1, one command: the typo's jobs re-pointed; the docs job (another cause) stays where it is. Without
# --from-model the command would move jobs of three models: it says so and moves nothing.
expect_exit 2 ns retry --config "$CONFIG" --batch nightly --model chat
expect_contains "$OUT" "under 3 models: big (1), chta (2), docs (1); say which with --from-model NAME" \
  "retry --model asks which model's jobs to move"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE model = 'chat'")" 1 "nothing moved"
expect_exit 0 ns retry --config "$CONFIG" --batch nightly --from-model chta --model chat
expect_contains "$OUT" "job $typo1 queued again on model chat" "the typo's first job moved"
expect_contains "$OUT" "job $typo2 queued again on model chat" "the typo's second job moved"
[[ "$OUT" != *"job $docs "* ]] || fail "retry --model moved the docs job, held for another cause: $OUT"
[[ "$OUT" != *"job $big "* ]] || fail "retry --model moved the failed job of another model: $OUT"
expect_eq "$(sql "SELECT model FROM jobs WHERE id = $docs")" "docs" "the docs job keeps its model"
# Fix 2, the file operation: the disk is mounted. Fix 3: the shard replaced, then one command.
mkdir -p "$WORK/archive" && cp "$WORK/chat.gguf" "$WORK/archive/docs.gguf"
cp "$WORK/pristine/$(basename "${shards[1]}")" "${shards[1]}"
expect_exit 0 ns retry --config "$CONFIG" --batch nightly --state failed
expect_contains "$OUT" "job $big queued again" "the damaged model's job queued again"

start_daemon --drain
wait_daemon 0
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE batch = 'nightly' AND state = 'done'")" 6 "the whole night done"
expect_eq "$(sql "SELECT count(*) FROM results WHERE job_id IN ($good, $typo1, $typo2, $docs, $big, $long)")" 6 \
  "one result per job"
expect_contains "$(ns status --config "$CONFIG")" "nightly" "status lists the batch"
[[ "$(ns status --config "$CONFIG")" != *"CANNOT SERVE"* ]] || fail "status still reports a problem"
alone=$(ns run --model "$WORK/slow.gguf" --threads 2 --max-tokens 300 --ignore-eos --temperature 0 --no-progress \
          "$prompt" 2>/dev/null | valid_utf8)
expect_eq "$(sql "SELECT text FROM results WHERE job_id = $long")" "$alone" "the killed job's text vs an uninterrupted run"
expect_eq "$(sql "PRAGMA integrity_check")" "ok" "database integrity"
echo "ok"
