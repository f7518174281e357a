# Long contexts with the real binaries (docs/long-context.md): a prompt longer
# than the daemon's context is refused at submit (--config), or fails alone at
# run when the check was skipped; a document longer than the context keeps its
# tail and its result says so; `model info` shows the batch x context pairs.
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf --n-ctx 256
write_config tiny=tiny.gguf
echo "context: 96" >> "$CONFIG"
echo "max_batch: 4" >> "$CONFIG"
long=""
for i in $(seq 1 60); do long+="word$i "; done

# At submit: the lengths, the daemon's context and the model's own length, and the fix.
expect_exit 4 ns submit --config "$CONFIG" --model tiny --max-tokens 4 "$long"
expect_contains "$OUT" "model 'tiny' in $CONFIG: the prompt is" "refused at submit, naming the model and config"
expect_contains "$OUT" "tokens but the context holds 96" "the context the daemon gives it"
expect_contains "$OUT" "raise \`context\` (the daemon config's, or run --context) up to the model's own length, 256" "the fix"

# Without the check (--any-model): the daemon fails that job alone; a short one beside it runs.
bad=$(ns submit --config "$CONFIG" --model tiny --max-tokens 4 --any-model "$long")
good=$(ns submit --config "$CONFIG" --model tiny --max-tokens 4 --ignore-eos "a short prompt")
expect_eq "$(sql "SELECT count(*) FROM jobs")" 2 "the refused prompt was not queued"
# A document longer than the context keeps its tail.
mkdir -p "$WORK/docs"
printf '%s' "$long" > "$WORK/docs/long.md"
expect_exit 0 ns submit --config "$CONFIG" --model tiny --max-tokens 6 --ignore-eos --dir "$WORK/docs" --batch docs
expect_exit 0 "$NIGHTSHIFTD" --config "$CONFIG" --drain
expect_eq "$(sql "SELECT state, error_kind FROM jobs WHERE id = $bad")" "failed|invalid_input" "the long prompt failed"
expect_contains "$(sql "SELECT error FROM jobs WHERE id = $bad")" "tokens but the context holds 96" "its error names the lengths"
expect_eq "$(sql "SELECT state FROM jobs WHERE id = $good")" "done" "the short job beside it ran"
doc=$(sql "SELECT id FROM jobs WHERE batch = 'docs'")
expect_eq "$(sql "SELECT j.state, r.completion_tokens, r.prompt_tokens + 6 <= 96, r.prompt_tokens_dropped > 0
                  FROM jobs j JOIN results r ON r.job_id = j.id WHERE j.id = $doc")" "done|6|1|1" \
  "the document ran on its tail, leaving room for max_tokens"
expect_contains "$(ns show --config "$CONFIG" "$doc")" "tokens from the front: the document is longer than the context" \
  "show says the front was dropped"
dropped=$(sql "SELECT prompt_tokens_dropped FROM results WHERE job_id = $doc")
expect_contains "$(ns show --config "$CONFIG" "$doc" --json)" "\"prompt_tokens_dropped\": $dropped" "show --json too"

# The plan's trade-off for the model's own length.
out=$(ns model info "$WORK/tiny.gguf" --memory-budget 256MiB --max-batch 8)
expect_contains "$out" "for 8 sequence(s) of up to 256 tokens sharing a KV cache of 2048 tokens" "the plan's pool"
expect_contains "$out" "max_batch x context that fit:" "the trade-off line"
echo "ok"
