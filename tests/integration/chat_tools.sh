# A JSONL batch whose chat lines offer tools and carry a tool call and its result
# runs end to end through the daemon: the model's own template (Qwen 3.5's, from
# ../shared/chat-templates, read in place) renders the tool definitions, the
# assistant's call and the tool's answer, and the job's greedy text equals
# `nightshift run` on what `nightshift chat render` prints for the same body.
# tool_choice "none" renders without the tools; a forced call is refused at submit.
source "$(dirname "$0")/lib.sh"

TEMPLATE_FILE="$NS_SOURCE_DIR/../shared/chat-templates/templates/Qwen3.5-4B.jinja"
[ -f "$TEMPLATE_FILE" ] || { echo "ok (skipped: $TEMPLATE_FILE is absent)"; exit 0; }
TEMPLATE=$(cat "$TEMPLATE_FILE"; printf x)
TEMPLATE=${TEMPLATE%x}
make_model qwen.gguf --arch llama --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 128 --type Q8_0 \
  --chat-template "$TEMPLATE"
write_config qwen=qwen.gguf
# model info names the template's source, its tokens, the tool-call markup and a rendered sample.
info=$(ns model info "$WORK/qwen.gguf")
expect_contains "$info" '"tool_calls":"qwen3.5-xml"' "model info: the tool-call markup"
expect_contains "$info" '<|im_start|>user\nHello!<|im_end|>' "model info: a rendered sample"

body='{"model": "qwen", "messages": [{"role": "system", "content": "You can call tools."}, {"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\", \"unit\": \"celsius\"}"}}]}, {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temperature\": 21}"}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.", "parameters": {"type": "object", "properties": {"location": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}}], "max_tokens": 12, "temperature": 0, "ignore_eos": true}'
printf '{"custom_id": "tools", "method": "POST", "url": "/v1/chat/completions", "body": %s}\n' "$body" \
  > "$WORK/tools.jsonl"
ns submit --config "$CONFIG" --jsonl "$WORK/tools.jsonl" > /dev/null
start_daemon --drain
wait_daemon 0
expect_eq "$(sql "SELECT state FROM jobs")" "done" "the chat job with tools ran"

printf '%s' "$body" > "$WORK/body.json"
prompt=$(ns chat render --model "$WORK/qwen.gguf" --messages "$WORK/body.json"; printf x)
prompt=${prompt%x}
expect_contains "$prompt" '"name": "get_weather"' "the tool's definition in the prompt"
expect_contains "$prompt" "<function=get_weather>" "the assistant's call in the template's markup"
expect_contains "$prompt" '{"temperature": 21}' "the tool's answer"
expect_result_is_run "$WORK/qwen.gguf" "$prompt" "tools-rendered"

# The export (with --config: the model's tool-call markup is known) writes the reply as an assistant message.
ns export --config "$CONFIG" --batch tools --jsonl "$WORK/out.jsonl" > /dev/null
python3 - "$WORK/out.jsonl" <<'PY' || fail "the exported line"
import json, sys
line = json.loads(open(sys.argv[1]).read())
choice = line["response"]["body"]["choices"][0]
assert choice["message"]["role"] == "assistant", choice
assert choice["finish_reason"] in ("length", "stop", "tool_calls"), choice
assert isinstance(choice["message"]["content"], str) or choice["message"].get("tool_calls"), choice
PY

# tool_choice "none": the same conversation without the definitions.
sed 's/"ignore_eos": true}/"ignore_eos": true, "tool_choice": "none"}/; s/"custom_id": "tools"/"custom_id": "none"/' \
  "$WORK/tools.jsonl" > "$WORK/none.jsonl"
ns submit --config "$CONFIG" --jsonl "$WORK/none.jsonl" > /dev/null
expect_eq "$(sql "SELECT instr(messages, 'Current weather') > 0 FROM jobs WHERE custom_id = 'none'")" "0" \
  "tool_choice none stores no tools"
# A forced call cannot be honoured: refused at submit, nothing queued.
sed 's/"ignore_eos": true}/"ignore_eos": true, "tool_choice": "required"}/; s/"custom_id": "tools"/"custom_id": "forced"/' \
  "$WORK/tools.jsonl" > "$WORK/forced.jsonl"
expect_exit 4 ns submit --config "$CONFIG" --jsonl "$WORK/forced.jsonl"
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE custom_id = 'forced'")" "0" "the forced call is not queued"
echo "ok"
