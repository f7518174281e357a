# n choices and logprobs through the daemon: a JSONL batch with an n = 3
# completion line with logprobs, the single-choice lines with seed + 1 and
# seed + 2, a chat line with logprobs, and an n above max_batch; drained by
# nightshiftd and exported. Checked with python3's json module: choice k of
# the n-job is the single job with seed + k (text and logprobs), usage counts
# the prompt once and sums the completions, every logprob field is in OpenAI's
# shape, and `run --json --logprobs` reports the same numbers as the daemon.
source "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || { echo "SKIP: python3 is needed to check the JSON"; exit 77; }

CHATML_TEMPLATE="{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
make_model chat.gguf --chat-template "$CHATML_TEMPLATE"
write_config chat=chat.gguf
echo "max_batch: 4" >> "$CONFIG"
echo "checkpoint_tokens: 2" >> "$CONFIG"

S='"prompt": "Once upon a time", "max_tokens": 6, "temperature": 0.9, "top_k": 0, "top_p": 1, "min_p": 0, "ignore_eos": true'
cat > "$WORK/requests.jsonl" <<JSONL
{"custom_id": "three", "method": "POST", "url": "/v1/completions", "body": {"model": "chat", $S, "seed": 10, "n": 3, "logprobs": 2}}
{"custom_id": "seed11", "method": "POST", "url": "/v1/completions", "body": {"model": "chat", $S, "seed": 11, "logprobs": 2}}
{"custom_id": "seed12", "method": "POST", "url": "/v1/completions", "body": {"model": "chat", $S, "seed": 12, "logprobs": 2}}
{"custom_id": "chat", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "chat", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "ignore_eos": true, "logprobs": true, "top_logprobs": 3, "n": 2}}
{"custom_id": "too-many", "method": "POST", "url": "/v1/completions", "body": {"model": "chat", "prompt": "x", "n": 9}}
JSONL
# submit refuses n above max_batch, naming the limit (#31); --any-model queues it for the daemon's own refusal.
expect_exit 4 ns submit --config "$CONFIG" --jsonl "$WORK/requests.jsonl"
expect_contains "$OUT" 'line 5 (custom_id "too-many"): n = 9 choices, but the daemon decodes at most max_batch = 4' \
  "submit names the limit"
ns submit --config "$CONFIG" --any-model --jsonl "$WORK/requests.jsonl" > /dev/null
expect_eq "$(sql "SELECT group_concat(custom_id || ':' || n || ':' || ifnull(top_logprobs, '-'), ' ') FROM (SELECT * FROM jobs ORDER BY id)")" \
  "three:3:2 seed11:1:2 seed12:1:2 chat:2:3 too-many:9:-" "n and top_logprobs stored per job"

start_daemon --drain
wait_daemon 0
ns export --config "$CONFIG" --batch requests --jsonl "$WORK/results.jsonl" > /dev/null
ns run --model "$WORK/chat.gguf" --json --logprobs --top-logprobs 2 --choices 3 --max-tokens 6 --temperature 0.9 \
  --top-k 0 --top-p 1 --min-p 0 --ignore-eos --seed 10 --no-progress "Once upon a time" > "$WORK/run.json"

python3 - "$WORK/results.jsonl" "$WORK/run.json" "$DB" <<'PY' || fail "the exported choices and logprobs are not right"
import json, math, sqlite3, sys
lines = {l["custom_id"]: l for l in (json.loads(x) for x in open(sys.argv[1], encoding="utf-8"))}
run = json.load(open(sys.argv[2], encoding="utf-8"))
db = sqlite3.connect(sys.argv[3])

three = lines["three"]["response"]["body"]
assert [c["index"] for c in three["choices"]] == [0, 1, 2], three
assert three["usage"]["completion_tokens"] == 18, three["usage"]
single = lines["seed11"]["response"]["body"]
assert single["usage"]["prompt_tokens"] == three["usage"]["prompt_tokens"], (single, three)
# Choice k is the single-choice job with seed + k: text and every logprob.
for k, cid in ((1, "seed11"), (2, "seed12")):
    other = lines[cid]["response"]["body"]["choices"][0]
    assert three["choices"][k]["text"] == other["text"], (k, three["choices"][k], other)
    assert three["choices"][k]["logprobs"] == other["logprobs"], (k, three["choices"][k]["logprobs"], other["logprobs"])
for c in three["choices"]:
    lp = c["logprobs"]
    assert set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}, lp
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) == 6, lp
    assert all(x <= 0 for x in lp["token_logprobs"]), lp
    assert lp["text_offset"][0] == 0 and lp["text_offset"] == sorted(lp["text_offset"]), lp
    for top in lp["top_logprobs"]:
        assert 1 <= len(top) <= 2 and all(v <= 0 for v in top.values()), top
        # the most likely alternative is at least as likely as the chosen token
    for chosen, top in zip(lp["token_logprobs"], lp["top_logprobs"]):
        assert max(top.values()) >= chosen - 1e-6, (chosen, top)
    assert sum(math.exp(v) for v in lp["top_logprobs"][0].values()) <= 1 + 1e-6
# run --json: the same choices and numbers as the daemon (the same engine, one process alone).
assert [c["text"] for c in run["choices"]] == [c["text"] for c in three["choices"]], (run, three)
assert [c["logprobs"] for c in run["choices"]] == [c["logprobs"] for c in three["choices"]], run

chat = lines["chat"]["response"]["body"]
assert len(chat["choices"]) == 2 and chat["usage"]["completion_tokens"] == 8, chat
for c in chat["choices"]:
    content = c["logprobs"]["content"]
    assert len(content) == 4, content
    for t in content:
        assert set(t) == {"token", "logprob", "bytes", "top_logprobs"}, t
        assert isinstance(t["bytes"], list) and t["logprob"] <= 0, t
        assert len(t["top_logprobs"]) == 3, t
        assert [a["logprob"] for a in t["top_logprobs"]] == sorted((a["logprob"] for a in t["top_logprobs"]), reverse=True), t
        for a in t["top_logprobs"]:
            assert set(a) == {"token", "logprob", "bytes"}, a
            try:
                assert a["token"] == bytes(a["bytes"]).decode("utf-8"), a
            except UnicodeDecodeError:
                assert "\ufffd" in a["token"], a

too_many = lines["too-many"]
assert too_many["response"] is None and too_many["error"]["code"] == "invalid_input", too_many
assert "lower n or raise max_batch" in too_many["error"]["message"], too_many
# The database: choice 0 in results.text, the others in results.choices, logprobs in one value per job.
text, choices, completion = db.execute(
    "SELECT r.text, r.choices, r.completion_tokens FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.custom_id = 'three'").fetchone()
assert len(json.loads(choices)) == 2 and completion == 18, (choices, completion)
assert db.execute("SELECT count(*) FROM results WHERE logprobs IS NOT NULL").fetchone()[0] == 4
PY
echo "ok"
