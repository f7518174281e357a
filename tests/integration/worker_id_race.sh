# Two nightshiftd under one worker_id started in the same instant: exactly one
# runs, the other refuses (exit 2), on SQLite and on PostgreSQL (#30 H: the
# check and the registration were two transactions; 4 of 5 SQLite trials had
# both running). Each trial ends on state: one daemon's exit, or both "ready".
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
write_config tiny=tiny.gguf
echo "worker_id: night" >> "$CONFIG"

# race CONFIG TRIALS: start two daemons at once, TRIALS times.
race() {
  local config=$1 trials=$2 t a b log_a log_b
  for ((t = 1; t <= trials; t++)); do
    log_a="$WORK/race-$t-a.log" log_b="$WORK/race-$t-b.log"
    "$NIGHTSHIFTD" --config "$config" > "$log_a" 2>&1 &
    a=$!
    "$NIGHTSHIFTD" --config "$config" > "$log_b" 2>&1 &
    b=$!
    settled() {
      ! kill -0 "$a" 2> /dev/null || ! kill -0 "$b" 2> /dev/null ||
        { grep -q "ready:" "$log_a" && grep -q "ready:" "$log_b"; }
    }
    wait_for 60 "trial $t: one daemon to refuse or both to be ready" settled
    local loser winner
    if ! kill -0 "$a" 2> /dev/null; then loser=$a winner=$b; else loser=$b winner=$a; fi
    kill -0 "$loser" 2> /dev/null && {
      kill -TERM "$a" "$b"
      fail "trial $t: both daemons under worker_id 'night' are running ($(grep -h 'ready:' "$log_a" "$log_b" | head -2))"
    }
    wait_pid "$loser" 2 10
    kill -0 "$winner" 2> /dev/null || fail "trial $t: neither daemon is running"
    expect_contains "$(cat "$log_a" "$log_b")" "worker_id 'night' is in use by a running nightshiftd (pid $winner" \
      "trial $t: the refusal names the daemon that runs"
    kill -TERM "$winner"
    wait_pid "$winner" 0 30
  done
}

race "$CONFIG" 5

if start_pg_server; then
  { grep -v '^database:' "$CONFIG"; echo "database: '$PG_URL'"; } > "$WORK/pg.yaml"
  race "$WORK/pg.yaml" 3
else
  echo "PostgreSQL part skipped: $PG_SKIP"
fi
echo "ok"
