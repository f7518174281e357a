# The JSONL batch workflow with the real binaries: an OpenAI Batch file with
# completion and chat lines and two bad lines is submitted (bad lines reported
# by number, the rest queued with batch, custom_id, provenance and messages),
# submitted again (nothing twice), exported before the daemon ran (nothing
# written, a hint), drained by `nightshiftd --drain`, and exported: one
# OpenAI output line per request in file order, checked with python3's json
# module, including a chat job that fails on a model without a chat template.
source "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || { echo "SKIP: python3 is needed to check the JSON"; exit 77; }

CHATML_TEMPLATE="{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

# An instruct-style model carries a chat template; a base model has none.
make_model tiny.gguf
make_model chat.gguf --chat-template "$CHATML_TEMPLATE"
write_config chat=chat.gguf tiny=tiny.gguf

# Line 3 is not JSON, line 5 has a bad field; line 6 asks a base model (no template) for a chat reply.
cat > "$WORK/requests.jsonl" <<'JSONL'
{"custom_id": "story", "method": "POST", "url": "/v1/completions", "body": {"model": "chat", "prompt": "Once upon a time", "max_tokens": 6, "temperature": 0, "ignore_eos": true}}
{"custom_id": "greeting", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "chat", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}], "max_tokens": 5, "seed": 3, "ignore_eos": true}}
{"custom_id": "broken", "method": "POST", "url": "/v1/completions", "body": {"model": "chat", "prompt": "unterminated
{"custom_id": "diary", "method": "POST", "url": "/v1/completions", "body": {"model": "tiny", "prompt": "Dear diary", "max_tokens": 4, "ignore_eos": true}}
{"custom_id": "typo", "method": "POST", "url": "/v1/completions", "body": {"model": "tiny", "prompt": "x", "temprature": 0.5}}
{"custom_id": "no-template", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "tiny", "messages": [{"role": "user", "content": "Hello?"}], "max_tokens": 3}}
JSONL

# With --config, submit refuses a chat line for a model whose GGUF has no chat
# template (nothing queued); --any-model below lets it through to show how the
# daemon fails it (a daemon with another config would get it that way).
sed -n '6p' "$WORK/requests.jsonl" > "$WORK/probe.jsonl"
expect_exit 4 ns submit --config "$CONFIG" --jsonl "$WORK/probe.jsonl"
expect_contains "$OUT" "line 1 (custom_id \"no-template\"): model 'tiny' ($WORK/tiny.gguf) has no chat template" \
  "submit checks the chat template"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 0 "the refused line is not queued"

expect_exit 4 ns submit --config "$CONFIG" --any-model --jsonl "$WORK/requests.jsonl"
expect_contains "$OUT" 'line 3: not valid JSON' "bad JSON reported by line"
expect_contains "$OUT" 'line 5 (custom_id "typo"): ' "bad field reported by line"
expect_contains "$OUT" "temprature" "the bad field is named"
expect_contains "$OUT" "batch requests: 6 lines, 4 new jobs, 0 already in the batch, 2 invalid" "submit summary"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 4 "valid lines queued"
expect_eq "$(sql "SELECT group_concat(custom_id || '@' || source_line, ' ') FROM (SELECT * FROM jobs ORDER BY id)")" \
  "story@1 greeting@2 diary@4 no-template@6" "custom ids and lines"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE batch = 'requests' AND source_path = '$WORK/requests.jsonl'")" 4 \
  "batch named after the file; provenance"
expect_eq "$(sql "SELECT json_extract(messages, '\$[1].content') || '|' || ifnull(prompt, 'NULL') FROM jobs WHERE custom_id = 'greeting'")" \
  "Hi there|NULL" "chat lines store messages, no prompt"
expect_eq "$(sql "SELECT model FROM jobs WHERE custom_id = 'diary'")" "tiny" "body.model names the model"

# Again: nothing new (exit 4 still: the bad lines are still bad).
expect_exit 4 ns submit --config "$CONFIG" --any-model --jsonl "$WORK/requests.jsonl"
expect_contains "$OUT" "0 new jobs, 4 already in the batch (4 queued), 2 invalid" "a resubmit queues nothing twice"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 4 "no duplicates"
# The fixed lines alone, as another file for the same batch: only they are new.
sed -n '3p;5p' "$WORK/requests.jsonl" |
  sed -e 's/"unterminated$/"fixed", "max_tokens": 3, "ignore_eos": true}}/' \
      -e 's/"temprature": 0.5/"temperature": 0.5, "max_tokens": 3, "ignore_eos": true/' \
  > "$WORK/fixes.jsonl"
json=$(ns submit --config "$CONFIG" --jsonl "$WORK/fixes.jsonl" --batch requests --json)
expect_eq "$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(r["new_jobs"], r["invalid"], r["batch"])' "$json")" \
  "2 0 requests" "fixed lines queued into the batch"

# Export before any daemon ran: nothing finished, so nothing written, and a hint.
ns export --config "$CONFIG" --batch requests --jsonl "$WORK/early.jsonl" > "$WORK/early.txt"
expect_contains "$(cat "$WORK/early.txt")" "0 done, 0 failed, 0 cancelled, 0 dead, 6 queued, 0 running; wrote 0 lines" "early export"
expect_contains "$(cat "$WORK/early.txt")" "6 jobs are not finished and were left out" "early export hint"
[[ ! -s "$WORK/early.jsonl" ]] || fail "an export with nothing finished wrote lines"
expect_eq "$(ns list --config "$CONFIG" --batch requests --state queued --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" \
  6 "list --batch"

start_daemon --drain
wait_daemon 0

ns export --config "$CONFIG" --batch requests --jsonl "$WORK/results.jsonl" > "$WORK/export.txt"
expect_contains "$(cat "$WORK/export.txt")" "batch requests: 5 done, 1 failed, 0 cancelled, 0 dead, 0 queued, 0 running; wrote 6 lines (1 errors)" \
  "export counts"
python3 - "$WORK/results.jsonl" "$DB" <<'PY' || fail "results.jsonl is not what the jobs hold"
import json, sqlite3, sys
lines = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
db = sqlite3.connect(sys.argv[2])
db.text_factory = bytes  # a random model's text may end inside a UTF-8 character
rows = {cid.decode(): (jid, text, ctoks, ptoks, reason and reason.decode()) for cid, jid, text, ctoks, ptoks, reason in db.execute(
    "SELECT j.custom_id, j.id, r.text, r.completion_tokens, r.prompt_tokens, r.finish_reason "
    "FROM jobs j LEFT JOIN results r ON r.job_id = j.id")}
def same_text(exported, stored):
    # Valid UTF-8 comes out as it is; invalid bytes become U+FFFD.
    try:
        return exported == stored.decode("utf-8")
    except UnicodeDecodeError:
        return "\ufffd" in exported

# File order: the first file's lines by number, then the second file's.
assert [l["custom_id"] for l in lines] == ["story", "greeting", "diary", "no-template", "broken", "typo"], lines
for l in lines:
    jid, text, ctoks, ptoks, reason = rows[l["custom_id"]]
    assert l["id"] == f"batch_req_{jid}", l
    if l["custom_id"] == "no-template":
        assert l["response"] is None, l
        assert l["error"]["code"] == "invalid_input", l
        assert "no chat template" in l["error"]["message"], l
        continue
    assert l["error"] is None, l
    body = l["response"]["body"]
    assert l["response"]["status_code"] == 200
    assert body["usage"] == {"prompt_tokens": ptoks, "completion_tokens": ctoks, "total_tokens": ptoks + ctoks}, l
    choice = body["choices"][0]
    assert choice["finish_reason"] == reason == "length", l
    if l["custom_id"] == "greeting":
        assert body["object"] == "chat.completion" and body["id"] == f"chatcmpl-{jid}", l
        assert choice["message"]["role"] == "assistant" and same_text(choice["message"]["content"], text), l
    else:
        assert body["object"] == "text_completion" and body["id"] == f"cmpl-{jid}", l
        assert same_text(choice["text"], text), l
    assert body["model"] == ("tiny" if l["custom_id"] in ("diary", "typo") else "chat"), l
assert rows["story"][2] == 6 and rows["greeting"][2] == 5 and rows["diary"][2] == 4
PY

# The chat job's prompt was rendered with the template: more prompt tokens than its text alone.
expect_eq "$(sql "SELECT r.prompt_tokens > 12 FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.custom_id = 'greeting'")" 1 \
  "chat prompt rendered with ChatML markers"
# To stdout, for a pipe: the same lines; the counts go to stderr.
expect_eq "$(ns export --config "$CONFIG" --batch requests --jsonl - 2>/dev/null)" "$(cat "$WORK/results.jsonl")" "export to stdout"
expect_exit 3 ns export --config "$CONFIG" --batch no-such-batch --jsonl "$WORK/x.jsonl"
expect_contains "$OUT" "recent batches: requests" "unknown batch names the known ones"
expect_exit 2 ns export --config "$CONFIG" --jsonl "$WORK/x.jsonl"
echo "ok"
