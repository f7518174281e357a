# `nightshift cancel`: a running job stops within a second (measured) and ends
# `cancelled` with its partial text; a queued job is cancelled at once and
# never runs; final and unknown jobs are refused with their exit codes.
source "$(dirname "$0")/lib.sh"

make_model slow.gguf --n-embd 256 --n-layer 4 --n-ff 768 --n-ctx 4096
write_config slow=slow.gguf
echo "context: 4096" >> "$CONFIG"

running=$(ns submit --config "$CONFIG" --model slow --max-tokens 3000 --ignore-eos --priority 9 "A long story")
queued=$(ns submit --config "$CONFIG" --model slow --max-tokens 3 "never runs")
after=$(ns submit --config "$CONFIG" --model slow --max-tokens 3 --ignore-eos "runs after the cancel")

expect_exit 0 ns cancel "$queued" --config "$CONFIG"
expect_eq "$(job_state "$queued")" "cancelled" "queued job cancelled at once"

start_daemon --drain
wait_for 20 "job $running to start" state_is "$running" running
# Decoding: its first checkpoint (checkpoint_tokens 32 by default) is written.
decoding() { (($(sql "SELECT ifnull((SELECT token_count FROM checkpoints WHERE job_id = $running), 0)") > 0)); }
wait_for 30 "job $running to checkpoint" decoding
t0=$(now_ms)
expect_exit 0 ns cancel "$running" --config "$CONFIG"
expect_contains "$OUT" "cancel requested" "cancel of a running job"
wait_for 10 "job $running to be cancelled" state_is "$running" cancelled
wait_daemon 0
# From the moment `nightshift cancel` started to the row the daemon wrote.
cancel_ms=$(($(sql "SELECT finished_ms FROM jobs WHERE id = $running") - t0))
echo "cancel: nightshift cancel -> job cancelled in $cancel_ms ms"
((cancel_ms >= 0 && cancel_ms < 1000)) || fail "cancellation took $cancel_ms ms (must be under a second)"

expect_eq "$(sql "SELECT finish_reason FROM results WHERE job_id = $running")" "cancelled" "partial result kept"
tokens=$(sql "SELECT completion_tokens FROM results WHERE job_id = $running")
((tokens > 0 && tokens < 3000)) || fail "partial result has $tokens tokens"
expect_eq "$(sql "SELECT length(text) > 0 FROM results WHERE job_id = $running")" 1 "partial text stored"
expect_eq "$(sql "SELECT count(*) FROM results WHERE job_id = $queued")" 0 "the cancelled queued job never ran"
expect_eq "$(job_state "$after")" "done" "the daemon carried on"
expect_contains "$(cat "$WORK/daemon.log")" "job $running cancelled after" "cancel logged"

expect_exit 1 ns cancel "$after" --config "$CONFIG"
expect_contains "$OUT" "already done" "cancel of a finished job"
expect_exit 3 ns cancel 999 --config "$CONFIG"
echo "ok"
