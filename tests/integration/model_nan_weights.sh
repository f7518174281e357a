# Issue #30 N: a model whose tensor data is damaged (a weight overwritten with
# NaNs) fails its jobs as a model fault (bad_model, not internal), the error
# naming the model and its file, and the daemon goes on serving other models.
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
expect_eq "$(job_state "$good")" done "the job on the healthy model, after it"
echo "ok"
