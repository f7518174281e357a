# A JSONL chat line on a gpt-oss file through the daemon: the file carries
# gpt-oss's own Jinja template (../shared/chat-templates, read in place), which
# the Jinja engine renders (as jinja2 rendered it: tests/unit/chat/gpt_oss_vectors.json,
# with today's UTC date in the preamble), and the job's greedy text equals
# `nightshift run` on that rendered prompt.
source "$(dirname "$0")/lib.sh"

OSS_FILE="$NS_SOURCE_DIR/../shared/chat-templates/templates/openai-gpt-oss-120b.jinja"
[ -f "$OSS_FILE" ] || { echo "ok (skipped: $OSS_FILE is absent)"; exit 0; }
OSS_TEMPLATE=$(cat "$OSS_FILE"; printf x)
OSS_TEMPLATE=${OSS_TEMPLATE%x}
make_model oss.gguf --arch gpt-oss --n-embd 128 --n-layer 4 --n-head 4 --n-head-kv 2 --oss-head-dim 32 --n-ff 128 \
  --n-expert 8 --n-expert-used 2 --oss-sliding-window 8 --type Q8_0 --tensor-type _exps=MXFP4 --vocab-pre gpt-4o \
  --chat-template "$OSS_TEMPLATE"
write_config oss=oss.gguf

cat > "$WORK/chat.jsonl" <<'JSONL'
{"custom_id": "hello", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "oss", "messages": [{"role": "system", "content": "You are a helpful assistant"}, {"role": "user", "content": "Hello"}], "max_tokens": 12, "temperature": 0, "ignore_eos": true}}
JSONL
ns submit --config "$CONFIG" --jsonl "$WORK/chat.jsonl" > /dev/null
day_before=$(date -u +%F)
start_daemon --drain
wait_daemon 0
day_after=$(date -u +%F)
expect_eq "$(sql "SELECT state FROM jobs")" "done" "the chat job ran"
[ "$day_before" = "$day_after" ] || { echo "ok (skipped the text check: the job ran across midnight UTC)"; exit 0; }

prompt=$(python3 -c '
import json, sys
doc = json.load(open(sys.argv[1]))
case = doc["cases"][0]
assert case["name"] == "system and user" and case["add_generation_prompt"]
sys.stdout.write(case["expected"].replace("Current date: " + doc["date"], "Current date: " + sys.argv[2]))' \
  "$NS_SOURCE_DIR/tests/unit/chat/gpt_oss_vectors.json" "$day_after")
expect_result_is_run "$WORK/oss.gguf" "$prompt" "harmony-rendered"
echo "ok"
