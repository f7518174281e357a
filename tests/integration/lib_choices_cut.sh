# A job with n = 3 choices that finish at different steps, cut by a SIGTERM
# drain after choice 0 finished and while choice 1 still runs (docs/fleet.md,
# finding 3: the daemon judged the job by choice 0 alone and stored it `done`
# with choice 1 `cancelled`). The job must go back to the queue with its
# checkpoint, and its resumed result must equal an uninterrupted run of the
# same job: text, finish reasons and logprobs of every choice; it is cut again
# once choice 2 has finished too, and resumed to the end. Sourced by
# choices_cut.sh (SQLite) and choices_cut_postgres.sh, which set:
#   Q            a function running one query on the queue ('|' separated)
#   CP_LENGTHS   SQL printing "choice0|choice1|choice2" checkpointed token counts of job $1
#   DB_ARGS      (array) the --db arguments for nightshift and nightshiftd, or none
command -v python3 > /dev/null || { echo "SKIP: python3 is needed to check the JSON"; exit 77; }

# 512 wide, 8 layers: ~100 tokens/s per choice on two loaded cores; near each cut the daemon is held still while
# they look (wait_frozen), so choice 1's 400 tokens outlast them at any load.
make_model slow.gguf --n-embd 512 --n-layer 8 --n-ff 1536 --n-ctx 4096
write_config slow=slow.gguf
{
  echo "context: 2048"
  echo "checkpoint_tokens: 3"  # counted over the choices: about one checkpoint per step
  echo "checkpoint_interval_ms: 0"
  echo "max_batch: 3"
} >> "$CONFIG"
MAX=400
SAMPLING=(--max-tokens "$MAX" --temperature 0.9 --top-k 0 --top-p 1 --min-p 0 --repeat-penalty 1.1 --ignore-eos
          --seed 7 --choices 3 --top-logprobs 2)

# The three choices without stop strings, then two stop strings picked from
# them: one choice 0 meets early, one choice 2 meets about halfway, neither in
# choice 1 (which runs to max_tokens). Stop strings only cut a choice's text,
# they never change its tokens, so the choices then end at different steps.
ns run --model "$WORK/slow.gguf" --threads 2 --json --no-progress "${SAMPLING[@]}" "Once upon a time" \
  > "$WORK/probe.json" 2> "$WORK/probe.err" || fail "nightshift run: $(cat "$WORK/probe.err")"
mapfile -t STOPS < <(python3 - "$WORK/probe.json" <<'PY'
import json, string, sys
texts = [c["text"] for c in json.load(open(sys.argv[1], encoding="utf-8"))["choices"]]
ok = set(string.ascii_letters + string.digits)
def pick(text, lo, hi, avoid):
    for n in (4, 5, 6, 3):
        for p in range(int(len(text) * lo), int(len(text) * hi)):
            s = text[p:p + n]
            if len(s) == n and set(s) <= ok and text.find(s) == p and not any(s in a for a in avoid):
                return s
    return None
early = pick(texts[0], 0.03, 0.2, [texts[1], texts[2][: len(texts[2]) // 3]])
half = pick(texts[2], 0.4, 0.7, [texts[1], texts[0][: texts[0].find(early) if early else 0]]) if early else None
if not early or not half:
    sys.exit("no stop strings fit these choices: " + repr(texts))
print(early)
print(half)
PY
) || fail "cannot pick stop strings from the probe run"
[[ ${#STOPS[@]} == 2 ]] || fail "stop strings: ${STOPS[*]}"
echo "stop strings: '${STOPS[0]}' (choice 0, early), '${STOPS[1]}' (choice 2, about halfway)"

mkdir "$WORK/in"
submit_one() {  # submit_one BATCH: the same job (the sampling above and the stop strings), alone in its batch
  python3 - "$MAX" "${STOPS[@]}" > "$WORK/in/$1.jsonl" <<'PY'
import json, sys
body = {"model": "slow", "prompt": "Once upon a time", "max_tokens": int(sys.argv[1]), "temperature": 0.9,
        "top_k": 0, "top_p": 1, "min_p": 0, "repeat_penalty": 1.1, "ignore_eos": True, "seed": 7, "n": 3,
        "logprobs": 2, "stop": sys.argv[2:]}
print(json.dumps({"custom_id": "n3", "method": "POST", "url": "/v1/completions", "body": body}))
PY
  ns submit --config "$CONFIG" "${DB_ARGS[@]}" --jsonl "$WORK/in/$1.jsonl" > /dev/null
  $Q "SELECT max(id) FROM jobs"
}
export_one() {  # export_one BATCH: its OpenAI batch line, in $WORK/BATCH.jsonl
  ns export --config "$CONFIG" "${DB_ARGS[@]}" --batch "$1" --jsonl "$WORK/$1.jsonl" > /dev/null
}

# The uninterrupted run.
ref=$(submit_one ref)
start_daemon "${DB_ARGS[@]}" --drain
wait_daemon 0
expect_eq "$($Q "SELECT state FROM jobs WHERE id = $ref")" done "the uninterrupted job"
export_one ref
mapfile -t REF < <(python3 - "$WORK/ref.jsonl" "$MAX" <<'PY'
import json, sys
body = json.loads(open(sys.argv[1], encoding="utf-8").readline())["response"]["body"]
lens = [len(c["logprobs"]["tokens"]) for c in body["choices"]]
reasons = [c["finish_reason"] for c in body["choices"]]
assert reasons == ["stop", "length", "stop"], reasons
assert lens[0] < lens[2] < lens[1] == int(sys.argv[2]), lens
print(lens[0]); print(lens[1]); print(lens[2])
PY
) || fail "the uninterrupted run's choices do not finish as planned"
echo "uninterrupted: choices end after ${REF[0]}, ${REF[1]} and ${REF[2]} tokens"

# The same job, cut once choice 0 has finished.
cut=$(submit_one cut)
start_daemon "${DB_ARGS[@]}"
choice0_done() {
  local l
  l=$($Q "$(printf "$CP_LENGTHS" "$cut")")
  [[ -n "$l" && "${l%%|*}" == "${REF[0]}" ]]
}
# Running free until the job's first checkpoint, then held still while each look runs (wait_frozen).
checkpointed() { [[ -n "$($Q "$(printf "$CP_LENGTHS" "$cut")")" ]]; }
wait_for 120 "job $cut's first checkpoint" checkpointed
wait_frozen 120 "choice 0 of job $cut to finish (its checkpoint)" choice0_done
kill -TERM "$DAEMON_PID"
kill -CONT "$DAEMON_PID"
wait_daemon 0
IFS='|' read -r c0 c1 c2 <<< "$($Q "$(printf "$CP_LENGTHS" "$cut")")"
echo "cut: choices checkpointed at $c0, $c1 and $c2 tokens"
((c1 < MAX)) || fail "choice 1 finished before the SIGTERM landed ($c1 tokens)"
expect_eq "$($Q "SELECT state FROM jobs WHERE id = $cut")" queued \
  "the cut job (choice 1 at $c1 of $MAX tokens) is released, not stored done"
expect_eq "$($Q "SELECT count(*) FROM results WHERE job_id = $cut")" 0 "no result for the cut job"
expect_eq "$($Q "SELECT outcome FROM attempts WHERE job_id = $cut")" released "the cut attempt's outcome"
expect_eq "$c0" "${REF[0]}" "choice 0 checkpointed whole"

# Resumed, and cut again once choice 2 has finished too (on its stop string):
# choice 0 ends right after its replay and is not generated again.
start_daemon "${DB_ARGS[@]}"
choice2_done() {
  local l
  l=$($Q "$(printf "$CP_LENGTHS" "$cut")")
  [[ -n "$l" && "${l##*|}" == "${REF[2]}" ]]
}
choice2_near() {  # within 30 tokens of its end: from here on the daemon is held still while each look runs
  local l
  l=$($Q "$(printf "$CP_LENGTHS" "$cut")")
  [[ -n "$l" ]] && ((${l##*|} + 30 >= ${REF[2]}))
}
wait_for 120 "choice 2 of job $cut to come within 30 tokens of its end" choice2_near
wait_frozen 120 "choice 2 of job $cut to finish (its checkpoint)" choice2_done
kill -TERM "$DAEMON_PID"
kill -CONT "$DAEMON_PID"
wait_daemon 0
expect_contains "$(cat "$WORK/daemon.log")" "resuming from $((c0 + c1 + c2)) checkpointed tokens" "the first resume"
IFS='|' read -r d0 d1 d2 <<< "$($Q "$(printf "$CP_LENGTHS" "$cut")")"
echo "cut again: choices checkpointed at $d0, $d1 and $d2 tokens"
((d1 < MAX)) || fail "choice 1 finished before the second SIGTERM landed ($d1 tokens)"
expect_eq "$($Q "SELECT state FROM jobs WHERE id = $cut")" queued "the job cut a second time is released"
expect_eq "$d0|$d2" "${REF[0]}|${REF[2]}" "choices 0 and 2 checkpointed whole"

# Resumed to the end: the same result as the uninterrupted run.
start_daemon "${DB_ARGS[@]}" --drain
wait_daemon 0
expect_eq "$($Q "SELECT state FROM jobs WHERE id = $cut")" done "the resumed job"
expect_contains "$(cat "$WORK/daemon.log")" "resuming from $((d0 + d1 + d2)) checkpointed tokens" "the second resume"
export_one cut
python3 - "$WORK/ref.jsonl" "$WORK/cut.jsonl" <<'PY' || fail "the resumed job differs from the uninterrupted one"
import json, sys
ref, cut = (json.loads(open(p, encoding="utf-8").readline())["response"]["body"] for p in sys.argv[1:])
for k, (a, b) in enumerate(zip(ref["choices"], cut["choices"])):
    for f in ("index", "text", "finish_reason", "logprobs"):
        assert a[f] == b[f], (k, f, a[f], b[f])
assert len(ref["choices"]) == len(cut["choices"]) == 3
assert ref["usage"] == cut["usage"], (ref["usage"], cut["usage"])
PY
echo "ok: the cut n = 3 job was released and resumed to the uninterrupted result"
