# Issue #30 D: a context that does not fit this process's memory (a GGUF whose
# context_length is 0xFFFFFFFF, read with context 0, under `ulimit -v`) is a
# clear error naming the model, the sizes and the fix, never std::bad_alloc
# through std::terminate (rc 134). `run` and `logits` exit 4; the daemon says
# why, leaves that model's jobs queued (a configuration mistake, not theirs)
# and keeps serving the other model's jobs.
source "$(dirname "$0")/lib.sh"

LIMIT_KB=2000000  # ~1.9 GiB of address space: the models fit, a 4-billion-token context does not
make_model huge-ctx.gguf --n-ctx 4294967295
make_model tiny.gguf

limited() { (ulimit -v "$LIMIT_KB" && "$@"); }

for cmd in run logits; do
  if [[ "$cmd" == run ]]; then
    expect_exit 4 limited "$NIGHTSHIFT" run --model "$WORK/huge-ctx.gguf" --context 0 --threads 2 --max-tokens 2 \
      --no-progress "Hello"
  else
    expect_exit 4 limited "$NIGHTSHIFT" logits --model "$WORK/huge-ctx.gguf" --context 0 --threads 2 --prompt "Hello"
  fi
  expect_contains "$OUT" "huge-ctx.gguf: a context of 4294967295 tokens" "$cmd names the model and the context"
  expect_contains "$OUT" "does not fit in memory" "$cmd says what is wrong"
  expect_contains "$OUT" "Set a smaller \`context\`" "$cmd names the fix"
done

# The daemon: context 0 (the model's own length) for both models.
write_config huge=huge-ctx.gguf tiny=tiny.gguf
huge_id=$(ns submit --config "$CONFIG" --model huge --max-tokens 2 "Too long a context")
tiny_id=$(ns submit --config "$CONFIG" --model tiny --max-tokens 2 --ignore-eos "Fits")
: > "$WORK/daemon.log"
(ulimit -v "$LIMIT_KB" && exec "$NIGHTSHIFTD" --config "$CONFIG") >> "$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
has_log() { grep -q "$1" "$WORK/daemon.log"; }
wait_for 60 "the daemon to refuse model huge" has_log "THIS DAEMON CANNOT SERVE MODEL huge"
wait_for 60 "job $tiny_id (model tiny) to finish" state_is "$tiny_id" done
kill -0 "$DAEMON_PID" || fail "the daemon died"
expect_eq "$(job_state "$huge_id")" queued "the job of the model that does not fit"
expect_contains "$(grep "CANNOT SERVE MODEL huge" "$WORK/daemon.log" | head -1)" "does not fit in memory" "the daemon's reason"
kill -TERM "$DAEMON_PID"
wait_daemon 0
echo "ok"
