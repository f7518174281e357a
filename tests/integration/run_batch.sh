# `nightshift run-batch` (issue 33): one command for an OpenAI Batch file.
# 1. A 200-line file (greedy and seeded lines, two bad ones) through run-batch
#    gives, per custom_id, the same output lines as submit + nightshiftd
#    --drain + export (ids and timestamps aside), in input order; the bad lines
#    are in results.errors.jsonl with their line numbers; the database is gone
#    unless --keep-db.
# 2. SIGINT mid-run (once lines are done in the run's database): exit 130,
#    no output written; the same command again finishes without computing the
#    finished lines again (their rows and attempts untouched) and writes what
#    an uninterrupted run writes.
source "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || { echo "SKIP: python3 is needed to check the JSON"; exit 77; }

make_model tiny.gguf
write_config tiny=tiny.gguf

# 200 lines: even ones greedy, odd ones sampled with a seed; line 57 is not JSON, line 120 has a bad field.
python3 - "$WORK/requests.jsonl" <<'PY'
import json, sys
words = ["river", "lamp", "stone", "garden", "winter", "letter", "harbor", "candle", "mountain", "song"]
with open(sys.argv[1], "w") as f:
    for i in range(1, 201):
        if i == 57:
            f.write('{"custom_id": "req-57", "body": {"prompt": "unterminated\n')
            continue
        body = {"prompt": f"The {words[i % 10]} and the {words[(i * 7) % 10]} number {i}", "max_tokens": 4 + i % 5,
                "ignore_eos": True}
        if i == 120:
            body["temprature"] = 0.3
        if i % 2:
            body.update(temperature=0.8, seed=i)
        else:
            body["temperature"] = 0
        f.write(json.dumps({"custom_id": f"req-{i}", "method": "POST", "url": "/v1/completions", "body": body}) + "\n")
PY

# The reference: the queue and the daemon.
expect_exit 4 ns submit --config "$CONFIG" --jsonl "$WORK/requests.jsonl" --model tiny
expect_contains "$OUT" "198 new jobs" "the reference submit"
start_daemon --drain
wait_daemon 0
ns export --config "$CONFIG" --batch requests --jsonl "$WORK/reference.jsonl" > /dev/null

# The same through run-batch, in a folder of its own.
mkdir "$WORK/out"
expect_exit 4 ns run-batch -i "$WORK/requests.jsonl" -o "$WORK/out/results.jsonl" --model "$WORK/tiny.gguf" \
  --threads 2 --no-progress
expect_contains "$OUT" "200 lines: 198 written to $WORK/out/results.jsonl, 2 errors in $WORK/out/results.errors.jsonl" \
  "run-batch's summary"
[[ ! -e "$WORK/out/results.run-batch.db" ]] || fail "the run's database was kept without --keep-db"

# compare.py OUT REF [ERRORS]: the same lines per custom_id, in input order (ids and times aside).
cat > "$WORK/compare.py" <<'PY'
import json, sys
def load(path):
    return [json.loads(l) for l in open(path, encoding="utf-8")]
def strip(line):
    line = json.loads(json.dumps(line))
    line.pop("id")
    body = line["response"]["body"]
    for k in ("id", "created"):
        body.pop(k)
    line["response"].pop("request_id")
    return line
out, ref = load(sys.argv[1]), load(sys.argv[2])
ref = [l for l in ref if l["error"] is None]
assert [l["custom_id"] for l in out] == [l["custom_id"] for l in ref], "not the same lines in the same order"
assert len(out) == 198, len(out)
order = [int(l["custom_id"].split("-")[1]) for l in out]
assert order == sorted(order), "not in input order"
for a, b in zip(out, ref):
    assert strip(a) == strip(b), (a, b)
    assert a["response"]["body"]["choices"][0]["finish_reason"] == "length", a
if len(sys.argv) > 3:
    errors = load(sys.argv[3])
    assert [e["custom_id"] for e in errors] == [None, "req-120"], errors  # line 57 cannot be read
    assert errors[0]["error"]["message"].startswith("line 57: not valid JSON"), errors[0]
    message = errors[1]["error"]["message"]
    assert message.startswith("line 120") and "temprature" in message, errors[1]
    assert all(e["response"] is None for e in errors), errors
print("ok")
PY
python3 "$WORK/compare.py" "$WORK/out/results.jsonl" "$WORK/reference.jsonl" "$WORK/out/results.errors.jsonl" ||
  fail "run-batch's output differs from submit + drain + export"

# 2. Interrupted and resumed: a slower model, longer lines, two at a time, so SIGINT lands mid-run.
make_model slow.gguf --n-embd 256 --n-layer 8 --n-ff 768 --n-ctx 4096
python3 - "$WORK/requests.jsonl" "$WORK/long.jsonl" <<'PY'
import json, sys
with open(sys.argv[2], "w") as f:
    for n, line in enumerate(open(sys.argv[1])):
        if n >= 40:
            break
        try:
            req = json.loads(line)
        except ValueError:
            continue
        req["body"].pop("temprature", None)
        req["body"]["max_tokens"] = 160
        f.write(json.dumps(req) + "\n")
PY
RUN_DB="$WORK/long/results.run-batch.db"
mkdir "$WORK/long" "$WORK/straight"
long_run() {  # long_run OUT_DIR [ARGS...]
  local dir=$1
  shift
  "$NIGHTSHIFT" run-batch -i "$WORK/long.jsonl" -o "$dir/results.jsonl" --model "$WORK/slow.gguf" --threads 2 \
    --max-batch 2 "$@"
}
# Not through long_run: $! must be run-batch's own pid, not a subshell's.
"$NIGHTSHIFT" run-batch -i "$WORK/long.jsonl" -o "$WORK/long/results.jsonl" --model "$WORK/slow.gguf" --threads 2 \
  --max-batch 2 --keep-db > "$WORK/interrupted.log" 2>&1 &
pid=$!
EXTRA_PIDS+=("$pid")
done_rows() {
  "$SQLITE3" -cmd ".timeout 5000" "$RUN_DB" "SELECT count(*) FROM jobs WHERE state = 'done'" 2> /dev/null || echo 0
}
enough_done() { (($(done_rows) >= 5)); }
wait_for 60 "five lines done in the run's database" enough_done
kill -INT "$pid"
wait_pid "$pid" 130 60
expect_contains "$(cat "$WORK/interrupted.log")" "run the same command again to resume" \
  "the interrupted run says how to resume"
[[ ! -e "$WORK/long/results.jsonl" ]] || fail "an interrupted run wrote its output"
before=$(done_rows)
((before >= 5 && before < 40)) || fail "SIGINT did not land mid-run: $before of 40 lines done"
expect_eq "$("$SQLITE3" "$RUN_DB" "SELECT count(*) FROM jobs WHERE state = 'running'")" 0 \
  "running lines released on SIGINT"
snapshot() {
  "$SQLITE3" "$RUN_DB" "SELECT j.id, j.finished_ms, j.attempt, (SELECT count(*) FROM attempts a WHERE a.job_id = j.id)
                        FROM jobs j WHERE j.state = 'done' ORDER BY j.id"
}
finished_before=$(snapshot)

expect_exit 0 long_run "$WORK/long" --keep-db
expect_contains "$OUT" "($before finished by an earlier run)" "the re-run resumes"
after=$(snapshot)
python3 - "$finished_before" "$after" <<'PY' || fail "the re-run computed finished lines again"
import sys
before = dict((r.split("|")[0], r) for r in sys.argv[1].splitlines())
after = dict((r.split("|")[0], r) for r in sys.argv[2].splitlines())
assert len(after) == 40, len(after)
for job, row in before.items():
    assert after[job] == row, (row, after[job])
PY

# An uninterrupted run writes the same output.
expect_exit 0 long_run "$WORK/straight"
python3 - "$WORK/long/results.jsonl" "$WORK/straight/results.jsonl" <<'PY' || fail "the resumed output differs"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 40, (len(a), len(b))
for x, y in zip(a, b):
    assert x["custom_id"] == y["custom_id"], (x, y)
    assert x["response"]["body"]["choices"] == y["response"]["body"]["choices"], (x, y)
    assert x["response"]["body"]["usage"] == y["response"]["body"]["usage"], (x, y)
PY
# The same command once more: nothing to compute, the very same bytes.
cp "$WORK/long/results.jsonl" "$WORK/first.jsonl"
expect_exit 0 long_run "$WORK/long"
expect_contains "$OUT" "(40 finished by an earlier run)" "a finished run is not run again"
cmp -s "$WORK/first.jsonl" "$WORK/long/results.jsonl" || fail "a re-run of a finished run changed the output"
[[ ! -e "$RUN_DB" ]] || fail "the database was kept without --keep-db"

# 3. kill -9 mid-run: the next run takes the killed run's lines back (nothing lost, nothing twice) and writes
#    what an uninterrupted run writes.
mkdir "$WORK/killed"
RUN_DB="$WORK/killed/results.run-batch.db"
"$NIGHTSHIFT" run-batch -i "$WORK/long.jsonl" -o "$WORK/killed/results.jsonl" --model "$WORK/slow.gguf" --threads 2 \
  --max-batch 2 > "$WORK/killed.log" 2>&1 &
pid=$!
EXTRA_PIDS+=("$pid")
wait_for 60 "five lines done in the killed run's database" enough_done
kill -KILL "$pid"
wait_pid "$pid" 137 30
expect_exit 0 long_run "$WORK/killed"
python3 - "$WORK/killed/results.jsonl" "$WORK/straight/results.jsonl" <<'PY' || fail "the output after kill -9 differs"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert [x["custom_id"] for x in a] == [y["custom_id"] for y in b] and len(a) == 40, [x["custom_id"] for x in a]
for x, y in zip(a, b):
    assert x["response"]["body"]["choices"] == y["response"]["body"]["choices"], (x, y)
PY

# 4. A line that fails fails alone: a chat line for a model without a chat template goes to the errors file, in
#    input order, with the reason; the lines around it are in the output.
{
  echo '{"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"prompt": "One", "max_tokens": 3}}'
  echo '{"custom_id": "b", "method": "POST", "url": "/v1/chat/completions",' \
    '"body": {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}}'
  echo '{"custom_id": "c", "method": "POST", "url": "/v1/completions", "body": {"prompt": "Two", "max_tokens": 3}}'
} > "$WORK/mixed.jsonl"
mkdir "$WORK/mixed"
expect_exit 4 ns run-batch -i "$WORK/mixed.jsonl" -o "$WORK/mixed/out.jsonl" --model "$WORK/tiny.gguf" --no-progress
expect_contains "$OUT" "3 lines: 2 written" "the mixed run's summary"
python3 - "$WORK/mixed/out.jsonl" "$WORK/mixed/out.errors.jsonl" <<'PY' || fail "the failing line"
import json, sys
out = [json.loads(l) for l in open(sys.argv[1])]
err = [json.loads(l) for l in open(sys.argv[2])]
assert [l["custom_id"] for l in out] == ["a", "c"], out
assert [l["custom_id"] for l in err] == ["b"], err
assert "chat template" in err[0]["error"]["message"], err
PY

# 5. The database is the run's own: one holding another batch's unfinished jobs (here a queue submitted to by
#    hand) is refused before anything is queued or run.
mkdir "$WORK/shared"
echo '{"custom_id": "x", "method": "POST", "url": "/v1/completions", "body": {"prompt": "not ours"}}' \
  > "$WORK/other.jsonl"
ns submit --db "$WORK/shared/out.run-batch.db" --model tiny --any-model --jsonl "$WORK/other.jsonl" > /dev/null
expect_exit 4 ns run-batch -i "$WORK/mixed.jsonl" -o "$WORK/shared/out.jsonl" --model "$WORK/tiny.gguf"
expect_contains "$OUT" "holds 1 unfinished jobs of other batches than 'mixed'" "another batch's queue"
expect_eq "$("$SQLITE3" "$WORK/shared/out.run-batch.db" "SELECT count(*) || ' ' || min(state) FROM jobs")" "1 queued" \
  "the refused run queued nothing and ran nothing"

# Usage errors name the fix.
expect_exit 4 ns run-batch -i "$WORK/long.jsonl" -o "$WORK/x.jsonl"
expect_contains "$OUT" "give --model PATH.gguf" "no model"
expect_exit 4 ns run-batch -i "$WORK/long.jsonl" -o "$WORK/x.jsonl" --model "$WORK/nope.gguf"
expect_contains "$OUT" "no such GGUF file" "a missing model file"
expect_exit 4 ns run-batch -i "$WORK/long.jsonl" -o "$WORK/x.jsonl" --model "$WORK/tiny.gguf" --db postgresql://h/db
expect_contains "$OUT" "a SQLite file of its own" "a PostgreSQL --db"
expect_exit 4 ns run-batch -i "$WORK/long.jsonl" -o "$WORK/nowhere/x.jsonl" --model "$WORK/tiny.gguf"
expect_contains "$OUT" "the folder $WORK/nowhere does not exist; create it" "a missing output folder"
echo "ok"
