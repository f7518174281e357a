# A JSONL chat line on a kimi-k3 file through the daemon: the file carries Kimi
# K3's own Jinja template (../shared/chat-templates, read in place), which the
# Jinja engine renders (as jinja2 rendered it: tests/unit/chat/kimi_k3_vectors.json),
# and the job's greedy text equals `nightshift run` on that rendered prompt.
source "$(dirname "$0")/lib.sh"

K3_FILE="$NS_SOURCE_DIR/../shared/chat-templates/templates/Kimi-K3.jinja"
[ -f "$K3_FILE" ] || { echo "ok (skipped: $K3_FILE is absent)"; exit 0; }
K3_TEMPLATE=$(cat "$K3_FILE"; printf x)
K3_TEMPLATE=${K3_TEMPLATE%x}
make_model k3.gguf --arch kimi-k3 --n-embd 128 --n-layer 4 --n-head 2 --n-ff 256 --n-expert 8 --n-expert-used 2 \
  --mla-every 2 --kda-head-dim 64 --kl-n-ff-expert 128 --attn-res-block 2 --expert-latent 64 --type Q8_0 \
  --tensor-type _exps=MXFP4 --chat-template "$K3_TEMPLATE"
write_config k3=k3.gguf

cat > "$WORK/chat.jsonl" <<'JSONL'
{"custom_id": "hello", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "k3", "messages": [{"role": "system", "content": "You are a helpful assistant"}, {"role": "user", "content": "Hello"}], "max_tokens": 12, "temperature": 0, "ignore_eos": true}}
JSONL
ns submit --config "$CONFIG" --jsonl "$WORK/chat.jsonl" > /dev/null
start_daemon --drain
wait_daemon 0
expect_eq "$(sql "SELECT state FROM jobs")" "done" "the chat job ran"

prompt=$(python3 -c '
import json, sys
case = json.load(open(sys.argv[1]))["cases"][0]
assert case["name"] == "system and user" and case["add_generation_prompt"]
sys.stdout.write(case["expected"])' "$NS_SOURCE_DIR/tests/unit/chat/kimi_k3_vectors.json")
expect_result_is_run "$WORK/k3.gguf" "$prompt" "K3-rendered"
echo "ok"
