# Crash blame (jobs/queue.h): kill -9 a daemon twice while it runs a batch of
# three jobs that have max_attempts 1. Charging the crash to every job in the
# batch (the old rule) left them all `dead`; now none is charged, each
# suspect runs alone (resuming its checkpoint), and every job finishes.
source "$(dirname "$0")/lib.sh"

# The same worker_id after each restart: its jobs are recovered at start-up.
slow_model_config crash "worker_id: daemon-a" "max_batch: 3" "context: 1024"

jobs=()
for i in 1 2 3 4 5 6; do
  jobs+=("$(ns submit --config "$CONFIG" --model crash --max-tokens 200 --ignore-eos --temperature 0 \
            --max-attempts 1 "Story number $i begins on a quiet morning")")
done

# A batch is under way in this round's daemon: at least two jobs it claimed
# (not the rows the killed one left) running side by side, each with a checkpoint of its own.
batch_running() {
  (($(sql "SELECT count(*) FROM jobs AS j JOIN checkpoints AS c ON c.job_id = j.id
           WHERE j.state = 'running' AND j.started_ms >= $round_start AND c.attempt = j.attempt") >= 2))
}
for round in 1 2; do
  round_start=$(now_ms)
  start_daemon
  wait_for 40 "a batch to run (round $round)" batch_running
  { kill -KILL "$DAEMON_PID" && wait "$DAEMON_PID"; } 2> /dev/null || true
  echo "round $round: killed with $(sql "SELECT count(*) FROM jobs WHERE state = 'running'") jobs running"
  cp "$WORK/daemon.log" "$WORK/daemon-$round.log"
done

start_daemon
all_done() { [[ "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" == 6 ]]; }
wait_for 40 "all six jobs to finish" all_done
kill -TERM "$DAEMON_PID"
wait_daemon 0

expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'dead'")" 0 "dead jobs"
unblamed=$(sql "SELECT count(*) FROM attempts WHERE error LIKE '%the attempt is not counted and it runs alone next'")
((unblamed >= 4)) || fail "expected at least 4 unblamed attempts (2 kills of a batch), got $unblamed"
expect_eq "$(sql "SELECT max(attempts) FROM jobs")" 1 "no job was charged for a crash"
# The suspects ran alone and resumed their checkpoints.
alone=$(cat "$WORK"/daemon*.log | grep -c "alone (a daemon died while it ran beside others)")
((alone >= unblamed)) || fail "each unblamed job should have run alone ($alone runs alone for $unblamed)"
resumed=$(sql "SELECT count(*) FROM attempts WHERE outcome = 'done' AND resumed_tokens >= 16")
((resumed >= 4)) || fail "expected the suspects to resume their checkpoints, $resumed did"
expect_eq "$(sql "SELECT count(*) FROM checkpoints")" 0 "no checkpoint left behind"
expect_eq "$(sql "PRAGMA integrity_check")" "ok" "database integrity"
echo "ok: $unblamed attempts not charged, $alone runs alone"
