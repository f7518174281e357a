# Issue #30 N: a model whose tensor data is damaged (a weight overwritten with
# NaNs) fails its jobs as a model fault (bad_model, not internal), the error
# naming the model and its file and the fix, and the daemon goes on serving
# other models. `nightshift run` on that file says the same (exit 4, a bad
# model file), and `run-batch` fails its line with the daemon's error.
source "$(dirname "$0")/lib.sh"

make_model good.gguf
make_model damaged.gguf
python3 "$NS_SOURCE_DIR/tests/support/gguf_poison.py" "$WORK/damaged.gguf" output_norm.weight
write_config good=good.gguf damaged=damaged.gguf

bad=$(ns submit --config "$CONFIG" --model damaged --max-tokens 4 --ignore-eos "a prompt")
good=$(ns submit --config "$CONFIG" --model good --max-tokens 4 --ignore-eos "a prompt")
start_daemon --drain
wait_daemon 0

expect_eq "$(job_state "$bad")" failed "the job on the damaged model"
expect_eq "$(sql "SELECT error_kind FROM jobs WHERE id = $bad")" bad_model "its error kind"
error=$(sql "SELECT error FROM jobs WHERE id = $bad")
expect_contains "$error" "model damaged ($WORK/damaged.gguf)" "the error names the model and its file"
expect_contains "$error" "is NaN" "the error says what was wrong"
expect_contains "$error" "download or convert it again" "the error says the fix"
expect_eq "$(job_state "$good")" done "the job on the healthy model, after it"

expect_exit 4 ns run -m "$WORK/damaged.gguf" -n 4 --ignore-eos --no-progress "a prompt"
expect_contains "$OUT" "nightshift run: model damaged ($WORK/damaged.gguf): logit of token" \
  "run's error names the model and its file"
expect_contains "$OUT" "is NaN" "run's error says what was wrong"
expect_contains "$OUT" "download or convert it again" "run's error says the fix"

echo '{"custom_id":"a","method":"POST","url":"/v1/completions","body":{"model":"x","prompt":"a prompt","max_tokens":4}}' \
  > "$WORK/requests.jsonl"
expect_exit 4 ns run-batch -i "$WORK/requests.jsonl" -o "$WORK/results.jsonl" --model "$WORK/damaged.gguf" --no-progress
errors=$(cat "$WORK/results.errors.jsonl")
expect_contains "$errors" '"code":"bad_model"' "run-batch's error kind"
expect_contains "$errors" "model damaged ($WORK/damaged.gguf): logit of token" \
  "run-batch's error names the model and its file"
expect_contains "$errors" "download or convert it again" "run-batch's error says the fix"
echo "ok"
