# README's exit-code table, held by every command (#31 item 6): 0 ok, 1 failure, 2 usage, 3 not found,
# 4 invalid input; a filesystem error says errno's words, never a library's ("basic_filebuf::underflow").
# One row per case: the status wanted, then the command line (ns = nightshift with this test's config).
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
write_config tiny=tiny.gguf
mkdir -p "$WORK/folder" "$WORK/docs"
echo "A document." > "$WORK/docs/a.md"
echo "root ::= \"x\"" > "$WORK/g.gbnf"
job=$(ns submit --config "$CONFIG" --model tiny --max-tokens 2 "x")
ns submit --config "$CONFIG" --model tiny --max-tokens 2 --ignore-eos --jsonl /dev/stdin --batch lines > /dev/null \
  <<< '{"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"prompt": "y"}}'

# status | command line                                                        | words the message must hold
rows=(
  "0|ns --version|nightshift"
  "2|ns frobnicate|unknown command"
  "0|ns run --model $WORK/tiny.gguf --max-tokens 2 --no-progress x|"
  "3|ns run --model $WORK/nosuch.gguf x|No such file or directory"
  "4|ns run --model $WORK/folder x|Is a directory"
  "3|ns run --model $WORK/tiny.gguf --prompt-file $WORK/nosuch.txt|No such file or directory"
  "2|ns run --model $WORK/tiny.gguf|no prompt"
  "3|ns logits --model $WORK/nosuch.gguf --prompt x|No such file or directory"
  "0|ns model info $WORK/tiny.gguf|"
  "3|ns model info $WORK/nosuch.gguf|No such file or directory"
  "4|ns model info $WORK/g.gbnf|"
  "2|ns model|"
  "0|ns submit --config $CONFIG --model tiny y|"
  "2|ns submit --config $CONFIG y|--model is required"
  "4|ns submit --config $CONFIG --model tiny --max-tokens 0 y|max_tokens"
  "4|ns submit --config $CONFIG --model tinny y|did you mean 'tiny'?"
  "3|ns submit --config $CONFIG --model tiny --prompt-file $WORK/nosuch.txt|No such file or directory"
  "3|ns submit --config $CONFIG --jsonl $WORK/nosuch.jsonl|No such file or directory"
  "4|ns submit --config $CONFIG --jsonl $WORK/folder|Is a directory"
  "3|ns submit --config $CONFIG --model tiny --dir $WORK/nosuch|No such file or directory"
  "4|ns submit --config $CONFIG --model tiny --dir $WORK/g.gbnf|Not a directory"
  "3|ns submit --config $CONFIG --model tiny --json-schema $WORK/nosuch.json y|No such file or directory"
  "4|ns submit --config $CONFIG --model tiny --grammar $WORK/folder y|Is a directory"
  "0|ns submit --config $CONFIG --model tiny --grammar $WORK/g.gbnf y|"
  "0|ns list --config $CONFIG|"
  "3|ns list --config $CONFIG --batch nosuch|no batch named nosuch"
  "2|ns list --config $CONFIG --state finished|"
  "0|ns show --config $CONFIG $job|"
  "3|ns show --config $CONFIG 999|"
  "3|ns cancel --config $CONFIG 999|no job 999"
  "3|ns cancel --config $CONFIG --batch nosuch|"
  "2|ns cancel --config $CONFIG|"
  "3|ns retry --config $CONFIG 999|no job 999"
  "1|ns retry --config $CONFIG $job|only failed, dead or cancelled"
  "0|ns status --config $CONFIG|"
  "3|ns status --config $CONFIG --batch nosuch|no batch named nosuch"
  "3|ns export --config $CONFIG --batch nosuch --jsonl $WORK/out.jsonl|no batch named nosuch"
  "4|ns export --config $CONFIG --batch lines --dir $WORK/out|has no document jobs"
  "0|ns export --config $CONFIG --dir $WORK/out|"
  "2|ns prune --config $CONFIG|--older-than"
  "0|ns completion bash|"
  "3|ns migrate-queue --from $WORK/nosuch.db --to $WORK/copy.db|does not exist"
  "2|ns migrate-queue --from $WORK/q.db|--to"
  "0|ns migrate-queue --help|Exit status"
)
expect_exit 0 ns migrate-queue --help
[[ "$OUT" == *"Workflows (each command"* ]] && fail "migrate-queue --help printed the top-level footer"
for row in "${rows[@]}"; do
  IFS='|' read -r want cmd words <<< "$row"
  read -ra argv <<< "$cmd"
  expect_exit "$want" "${argv[@]}"
  [[ -z "$words" ]] || expect_contains "$OUT" "$words" "$cmd"
  [[ "$OUT" == *basic_filebuf* ]] && fail "a library's message leaked from: $cmd -> $OUT"
done
echo "ok"
