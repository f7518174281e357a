# The fleet scenario, on the backend named by $FLEET_BACKEND (sqlite or
# postgres), sourced by tests/integration/fleet_*.sh after lib.sh:
#
# Three nightshiftd processes (worker ids fleet-a, fleet-b, fleet-c) share one
# queue. fleet-a starts alone and takes a long job; fleet-b and fleet-c join;
# fleet-a is killed with SIGKILL in the middle of its long job; 300 short
# jobs are submitted (on PostgreSQL the server then restarts under the
# fleet). fleet-b and fleet-c run all 300 jobs and, once the
# dead daemon's lease expires, finish its job from its checkpoint. Checked
# with SQL: every job done exactly once (one counted claim, one attempt row,
# one result) but the taken-over one, whose history is
# lease_expired -> done; no job in two daemons' logs; the workers table
# lists the fleet.

FLEET_JOBS=300

# One query against the fleet's queue, rows on lines, columns '|' separated.
q() {
  if [[ "$FLEET_BACKEND" == postgres ]]; then
    psql "$FLEET_DB" -X -q -At -v ON_ERROR_STOP=1 -c "$1"
  else
    "$SQLITE3" -cmd ".timeout 5000" "$FLEET_DB" "$1"
  fi
}

fleet_setup() {
  if [[ "$FLEET_BACKEND" == postgres ]]; then
    start_pg_server || {
      echo "skipped: $PG_SKIP"
      exit 77
    }
    FLEET_PG_DIR=$PG_DIR
    FLEET_DB=$PG_URL
  else
    FLEET_DB="$DB"
  fi

  make_model tiny.gguf
  make_model slow.gguf --n-embd 384 --n-layer 8 --n-ff 1024 --n-ctx 4096
  write_config tiny=tiny.gguf slow=slow.gguf
  {
    echo "context: 1024"
    echo "lease_ms: 3000"  # well above a server restart (postgres), so no live lease lapses during it
    echo "checkpoint_tokens: 16"
    echo "checkpoint_interval_ms: 0"
  } >> "$CONFIG"
  for w in a b c; do
    sed "s/^database: q.db$/database: q.db\nworker_id: fleet-$w/" "$CONFIG" > "$WORK/$w.yaml"
  done
}

start_fleet_daemon() {  # start_fleet_daemon a|b|c: sets FLEET_PID_<w>
  "$NIGHTSHIFTD" --config "$WORK/$1.yaml" --db "$FLEET_DB" > "$WORK/daemon-$1.log" 2>&1 &
  local pid=$!
  EXTRA_PIDS+=("$pid")
  printf -v "FLEET_PID_$1" '%s' "$pid"
}

fleet_run() {
  local t0
  t0=$(now_ms)
  fleet_setup
  # The long job, first in line: fleet-a (alone for now) takes it.
  long=$(ns submit --db "$FLEET_DB" --model slow --max-tokens 900 --ignore-eos --temperature 0 --priority 5 \
    "The lighthouse keeper wrote in his log that night")
  start_fleet_daemon a
  running_on_a() { [[ "$(q "SELECT worker FROM jobs WHERE id = $long AND state = 'running'")" == fleet-a ]]; }
  wait_for 30 "fleet-a to take job $long" running_on_a
  start_fleet_daemon b
  start_fleet_daemon c
  # Kill fleet-a in the middle of its long job, as soon as it has checkpointed.
  checkpointed() { (($(q "SELECT coalesce((SELECT token_count FROM checkpoints WHERE job_id = $long), 0)") >= 16)); }
  wait_for 30 "fleet-a to checkpoint job $long" checkpointed
  { kill -KILL "$FLEET_PID_a" && wait "$FLEET_PID_a"; } 2> /dev/null || true
  local at_kill
  at_kill=$(q "SELECT token_count FROM checkpoints WHERE job_id = $long")
  expect_eq "$(q "SELECT state || ':' || worker FROM jobs WHERE id = $long")" "running:fleet-a" \
    "the long job right after kill -9"
  echo "fleet-a killed with $at_kill tokens of job $long checkpointed"

  # The short jobs arrive while fleet-b and fleet-c work (and the lease of the dead daemon runs out).
  for i in $(seq 1 "$FLEET_JOBS"); do echo "Fleet prompt number $i about the tides"; done > "$WORK/prompts.txt"
  ns submit --db "$FLEET_DB" --model tiny --max-tokens 4 --ignore-eos --key fleet --prompt-lines "$WORK/prompts.txt" \
    > "$WORK/ids.txt"
  expect_eq "$(wc -l < "$WORK/ids.txt")" "$FLEET_JOBS" "ids printed by submit"
  if [[ "$FLEET_BACKEND" == postgres ]]; then
    # The server restarts under the working fleet: every connection is cut;
    # the daemons retry (transient errors) and reconnect.
    bash "$NS_SOURCE_DIR/tests/support/pg_test_server.sh" restart "$FLEET_PG_DIR" || fail "restarting PostgreSQL"
    echo "PostgreSQL restarted with $(q "SELECT count(*) FROM jobs WHERE state = 'done'") jobs done"
  fi

  all_done() { [[ "$(q "SELECT count(*) FROM jobs WHERE state = 'done'")" == $((FLEET_JOBS + 1)) ]]; }
  wait_for 45 "all $((FLEET_JOBS + 1)) jobs to be done" all_done
  # `nightshift status` on the same queue lists the live daemons.
  expect_exit 0 ns status --db "$FLEET_DB"
  expect_contains "$OUT" "fleet-b" "status lists fleet-b"
  expect_contains "$OUT" "fleet-c" "status lists fleet-c"
  kill -TERM "$FLEET_PID_b" "$FLEET_PID_c"
  wait_pid "$FLEET_PID_b" 0
  wait_pid "$FLEET_PID_c" 0

  # The short jobs: each run exactly once, by a live daemon.
  local short="idempotency_key LIKE 'fleet:%'"
  expect_eq "$(q "SELECT count(*) FROM jobs WHERE $short")" "$FLEET_JOBS" "short jobs stored"
  expect_eq "$(q "SELECT count(DISTINCT id) FROM jobs WHERE $short")" "$FLEET_JOBS" "distinct short jobs"
  expect_eq "$(q "SELECT count(*) FROM jobs WHERE $short AND state = 'done' AND attempts = 1 AND attempt = 1")" \
    "$FLEET_JOBS" "short jobs done with one claim each"
  expect_eq "$(q "SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.$short")" "$FLEET_JOBS" \
    "one attempt row per short job"
  expect_eq "$(q "SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.$short AND
                  a.outcome = 'done' AND a.worker = j.worker AND a.worker IN ('fleet-b', 'fleet-c')")" \
    "$FLEET_JOBS" "each short job's attempt done by the worker the job names"
  expect_eq "$(q "SELECT count(*) FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.$short AND
                  r.completion_tokens = 4")" "$FLEET_JOBS" "one result of 4 tokens per short job"
  sort -n "$WORK/ids.txt" > "$WORK/printed.txt"
  q "SELECT id FROM jobs WHERE $short ORDER BY id" > "$WORK/stored.txt"
  cmp -s "$WORK/printed.txt" "$WORK/stored.txt" || fail "the ids printed by submit and the ids stored differ"

  # The killed daemon's job: taken over after its lease expired, resumed, finished once.
  expect_eq "$(q "SELECT count(*) FROM attempts WHERE job_id = $long")" 2 "attempts of the long job"
  expect_eq "$(q "SELECT worker || ':' || outcome || ':' || resumed_tokens FROM attempts
                  WHERE job_id = $long AND attempt = 1")" "fleet-a:lease_expired:0" "first attempt of the long job"
  local second
  second=$(q "SELECT worker || ':' || outcome || ':' || resumed_tokens FROM attempts WHERE job_id = $long AND attempt = 2")
  [[ "$second" == "fleet-b:done:$at_kill" || "$second" == "fleet-c:done:$at_kill" ]] ||
    fail "second attempt of the long job: expected fleet-b or fleet-c done from $at_kill tokens, got $second"
  expect_eq "$(q "SELECT attempts || ',' || attempt FROM jobs WHERE id = $long")" "2,2" "the long job's claims"
  expect_eq "$(q "SELECT completion_tokens FROM results WHERE job_id = $long")" 900 "the long job's tokens"
  expect_eq "$(q "SELECT count(*) FROM jobs WHERE state <> 'done'")" 0 "jobs not done"
  expect_eq "$(q "SELECT count(*) FROM checkpoints")" 0 "checkpoints left behind"
  expect_eq "$(q "SELECT count(*) FROM results")" $((FLEET_JOBS + 1)) "results"

  # Every claim logged once: 300 short jobs and the long job twice; no short job in two daemons' logs.
  cat "$WORK"/daemon-*.log | grep -o "job [0-9]* running" | sort > "$WORK/claims.txt" || true
  expect_eq "$(wc -l < "$WORK/claims.txt")" $((FLEET_JOBS + 2)) "claims logged by the daemons"
  expect_eq "$(uniq -d "$WORK/claims.txt" | tr '\n' ' ')" "job $long running " "jobs claimed twice"
  # The fleet as `nightshift status` reads it.
  expect_eq "$(q "SELECT count(*) FROM workers WHERE id IN ('fleet-a', 'fleet-b', 'fleet-c')")" 3 "workers listed"
  expect_eq "$(q "SELECT count(*) FROM workers WHERE stopped_ms IS NOT NULL AND id IN ('fleet-b', 'fleet-c')")" 2 \
    "fleet-b and fleet-c stopped cleanly"
  expect_eq "$(q "SELECT count(*) FROM workers WHERE id = 'fleet-a' AND stopped_ms IS NULL")" 1 \
    "fleet-a died without saying so"

  local by_b by_c
  by_b=$(q "SELECT count(*) FROM jobs WHERE worker = 'fleet-b'")
  by_c=$(q "SELECT count(*) FROM jobs WHERE worker = 'fleet-c'")
  echo "$FLEET_BACKEND fleet: fleet-b ran $by_b jobs, fleet-c $by_c (one of them took over job $long);" \
    "the whole test took $(($(now_ms) - t0)) ms"
  echo "ok"
}
