# nightshift chat render: a conversation through a template's own Jinja
# source. With --model the template and bos_token/eos_token come from the
# GGUF (make_model's vocabulary: <|bos|>, <|eos|>); with --template from the
# file and the flags. A template that raises exits 4 with its message. Where
# ../shared/chat-templates is present, a real template's output equals the
# bytes jinja2 gave (its expected/ file, read in place).
source "$(dirname "$0")/lib.sh"

TEMPLATE='{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content | trim }}{% endfor %}{% if tools is defined %} tools={{ tools | map(attribute="name") | join(",") }}{% endif %}{% if add_generation_prompt %}[assistant]{% endif %}{{ eos_token }}'
make_model chat.gguf --chat-template "$TEMPLATE"
printf '%s' "$TEMPLATE" > "$WORK/chat.jinja"
cat > "$WORK/messages.json" <<'JSON'
[{"role": "system", "content": "Be brief. "}, {"role": "user", "content": " Hé 🚀"}]
JSON
echo '[{"name": "get_weather"}, {"name": "search"}]' > "$WORK/tools.json"

out=$(ns chat render --model "$WORK/chat.gguf" --messages "$WORK/messages.json")
expect_eq "$out" "<|bos|>[system] Be brief.[user] Hé 🚀[assistant]<|eos|>" "the GGUF's template and tokens"

out=$(ns chat render --template "$WORK/chat.jinja" --messages "$WORK/messages.json" --tools "$WORK/tools.json" \
        --no-add-generation-prompt --bos "<s>" --eos "</s>")
expect_eq "$out" "<s>[system] Be brief.[user] Hé 🚀 tools=get_weather,search</s>" "a template file, tools and flags"

echo '{"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "t"}]}' > "$WORK/request.json"
out=$(ns chat render --template "$WORK/chat.jinja" --messages "$WORK/request.json")
expect_eq "$out" "[user] x tools=t[assistant]" "a request body's messages and tools"

printf '%s' "{{ raise_exception('Only user and assistant roles are supported!') }}" > "$WORK/raise.jinja"
expect_exit 4 ns chat render --template "$WORK/raise.jinja" --messages "$WORK/messages.json"
expect_contains "$OUT" "Only user and assistant roles are supported!" "the template's message"
expect_exit 4 ns chat render --template "$WORK/raise.jinja" --messages "$WORK/tools.json.missing"
expect_exit 2 ns chat render --messages "$WORK/messages.json"

SHARED="$NS_SOURCE_DIR/../shared/chat-templates"
if [[ -d "$SHARED" ]]; then
  python3 - "$SHARED" "$WORK" <<'PY'
import json, sys
shared, work = sys.argv[1], sys.argv[2]
conv = next(c for c in json.load(open(f"{shared}/conversations.json")) if c["name"] == "tools")
json.dump(conv["messages"], open(f"{work}/conv.json", "w"))
json.dump(conv["tools"], open(f"{work}/conv_tools.json", "w"))
case = next(c for c in json.load(open(f"{shared}/expected/Qwen3.5-4B.json"))
            if c["conversation"] == "tools" and c["add_generation_prompt"])
open(f"{work}/want.txt", "w").write(case["output"])
PY
  ns chat render --template "$SHARED/templates/Qwen3.5-4B.jinja" --messages "$WORK/conv.json" \
    --tools "$WORK/conv_tools.json" --bos "<s>" --eos "</s>" > "$WORK/got.txt"
  cmp "$WORK/got.txt" "$WORK/want.txt" || fail "Qwen3.5-4B's tools conversation differs from jinja2's"
else
  echo "(../shared/chat-templates absent: the real-template check is skipped)"
fi
echo "ok"
