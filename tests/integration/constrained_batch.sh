# Constrained decoding through the daemon: a 200-line JSONL extraction batch
# (completion and chat lines) with one strict JSON schema runs with max_batch
# 16 on a random-weight model, and every exported output validates against
# the schema with python3's jsonschema (a real validator). Also: a schema the
# compiler cannot honour is refused at submit with its JSON path (exit 4);
# `submit --json-schema` and `run --json-schema` / `--grammar`; a job whose
# stored grammar does not compile fails alone with the parser's message.
source "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || { echo "SKIP: python3 is needed to check the JSON"; exit 77; }
python3 -c 'import jsonschema' 2> /dev/null || { echo "SKIP: python3-jsonschema is needed (apt install python3-jsonschema)"; exit 77; }

CHATML_TEMPLATE="{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
make_model chat.gguf --chat-template "$CHATML_TEMPLATE"
write_config chat=chat.gguf
echo "max_batch: 16" >> "$CONFIG"

cat > "$WORK/schema.json" <<'JSON'
{"type": "object",
 "properties": {
   "id": {"type": "integer"},
   "name": {"type": "string", "maxLength": 16},
   "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 3},
   "price": {"type": "number"},
   "in_stock": {"type": "boolean"},
   "dims": {"type": "object", "properties": {"w": {"type": "number"}, "h": {"type": "number"}},
            "required": ["w", "h"], "additionalProperties": false},
   "note": {"type": ["string", "null"], "maxLength": 12}},
 "required": ["id", "name", "tags", "price", "in_stock", "dims", "note"],
 "additionalProperties": false}
JSON

python3 - "$WORK/schema.json" "$WORK/requests.jsonl" <<'PY'
import json, sys
schema = json.load(open(sys.argv[1]))
rf = {"type": "json_schema", "json_schema": {"name": "product", "schema": schema, "strict": True}}
with open(sys.argv[2], "w") as out:
    for i in range(200):
        doc = f"Product {i}: a {['red', 'green', 'blue'][i % 3]} widget, {i % 7 + 1} cm wide, costs {i * 1.25:.2f} EUR."
        if i % 4 == 3:
            body = {"model": "chat", "messages": [{"role": "system", "content": "Extract the product as JSON."},
                                                  {"role": "user", "content": doc}]}
        else:
            body = {"model": "chat", "prompt": "Extract the product as JSON.\n" + doc + "\nJSON: "}
        body.update({"max_tokens": 400, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0, "seed": i,
                     "response_format": rf})
        url = "/v1/chat/completions" if "messages" in body else "/v1/completions"
        out.write(json.dumps({"custom_id": f"p{i}", "method": "POST", "url": url, "body": body}) + "\n")
PY

# A schema feature the compiler does not support: refused at submit, by its path, nothing queued.
python3 - "$WORK/bad.jsonl" <<'PY'
import json, sys
schema = {"type": "object", "properties": {"date": {"type": "string", "format": "week"}}}
rf = {"type": "json_schema", "json_schema": {"name": "d", "schema": schema, "strict": True}}
body = {"model": "chat", "prompt": "x", "response_format": rf}
open(sys.argv[1], "w").write(json.dumps({"custom_id": "d", "method": "POST", "url": "/v1/completions", "body": body}) + "\n")
PY
expect_exit 4 ns submit --config "$CONFIG" --jsonl "$WORK/bad.jsonl"
expect_contains "$OUT" 'body.response_format.json_schema.schema.properties.date.format: format "week" is not supported' \
  "an unsupported schema feature is refused with its path"
echo '{"type": "object", "properties": {"n": {"type": "number", "minimum": 0}}}' > "$WORK/bad_schema.json"
expect_exit 4 ns submit --config "$CONFIG" --model chat --json-schema "$WORK/bad_schema.json" "x"
expect_contains "$OUT" '$.properties.n.minimum: "minimum" is supported for "type": "integer" only' \
  "--json-schema refusal names the path"
echo '{"type": "string", "pattern": "^(a)\\1$"}' > "$WORK/bad_pattern.json"
expect_exit 4 ns submit --config "$CONFIG" --model chat --json-schema "$WORK/bad_pattern.json" "x"
expect_contains "$OUT" '$.pattern: the pattern has a backreference \1 at offset 5' "an unsupported pattern construct"
printf 'root ::= "a" missing\n' > "$WORK/bad.gbnf"
expect_exit 4 ns submit --config "$CONFIG" --model chat --grammar "$WORK/bad.gbnf" "x"
expect_contains "$OUT" "'missing' is used but never defined" "--grammar refusal"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 0 "nothing queued by the refusals"

ns submit --config "$CONFIG" --jsonl "$WORK/requests.jsonl" > "$WORK/submit.txt" || fail "submit failed: $(cat "$WORK/submit.txt")"
expect_contains "$(cat "$WORK/submit.txt")" "200 new jobs" "the batch is queued"
expect_eq "$(sql "SELECT count(DISTINCT grammar) || ' ' || min(length(grammar) > 0) FROM jobs")" "1 1" \
  "every job stores the one compiled grammar"
# One more job, its grammar damaged in the row (as an old client or a hand edit could): it fails alone.
ns submit --config "$CONFIG" --model chat --max-tokens 8 --grammar <(printf 'root ::= [a-z]+\n') "broken" > /dev/null
sql "UPDATE jobs SET grammar = 'root ::= nope' WHERE prompt = 'broken'"
# A plain --json-schema job beside them.
ns submit --config "$CONFIG" --model chat --max-tokens 400 --temperature 1 --seed 7 \
  --json-schema "$WORK/schema.json" "Extract:" > /dev/null

start_daemon --drain
# On state, with room: 202 constrained jobs took 7 s alone and over 30 s beside the suite's heaviest tests under -j4.
finished() { [[ "$(sql "SELECT count(*) FROM jobs WHERE state IN ('done', 'failed', 'dead')")" == 202 ]]; }
wait_for 240 "the 202 jobs to finish" finished
wait_daemon 0
expect_eq "$(sql "SELECT state || ': ' || error FROM jobs WHERE prompt = 'broken'")" \
  "failed: grammar line 1, column 10: rule 'nope' is used but never defined" "a bad stored grammar fails its job alone"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" 201 "every other job done"

ns export --config "$CONFIG" --batch requests --jsonl "$WORK/results.jsonl" > /dev/null
sql "SELECT r.text FROM jobs j JOIN results r ON r.job_id = j.id WHERE j.prompt = 'Extract:'" > "$WORK/single.txt"
python3 - "$WORK/schema.json" "$WORK/results.jsonl" "$WORK/single.txt" <<'PY' || fail "an output does not validate"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
assert len(lines) == 200, len(lines)
bad = 0
for line in lines:
    choice = line["response"]["body"]["choices"][0]
    text = choice["message"]["content"] if "message" in choice else choice["text"]
    try:
        assert choice["finish_reason"] == "stop", choice["finish_reason"]
        jsonschema.validate(json.loads(text), schema)
    except Exception as e:
        bad += 1
        print(line["custom_id"], repr(text), str(e).splitlines()[0])
jsonschema.validate(json.loads(open(sys.argv[3]).read()), schema)
print(f"{len(lines)} outputs validated, {bad} bad")
sys.exit(1 if bad else 0)
PY

# run: --json-schema and --grammar without the queue.
out=$(ns run --model "$WORK/chat.gguf" --temperature 1 --seed 3 -n 400 --json-schema "$WORK/schema.json" --json "Extract:")
python3 -c 'import json, sys, jsonschema; r = json.loads(sys.argv[1]); jsonschema.validate(json.loads(r["text"]), json.load(open(sys.argv[2]))); assert r["finish_reason"] == "stop"' \
  "$out" "$WORK/schema.json" || fail "run --json-schema: $out"
printf 'root ::= "yes" | "no"\n' > "$WORK/yn.gbnf"
out=$(ns run --model "$WORK/chat.gguf" --temperature 1 --seed 5 -n 20 --grammar "$WORK/yn.gbnf" --json "Answer:")
answer=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["text"])' "$out")
[[ "$answer" == yes || "$answer" == no ]] || fail "run --grammar gave '$answer'"
