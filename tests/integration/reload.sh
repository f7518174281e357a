# SIGHUP reloads the config: a model added and a new log level apply to the
# next job without a restart; keys that need a restart are named; a broken
# config is refused and the running one stays in effect.
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
cp "$WORK/tiny.gguf" "$WORK/second.gguf"
write_config tiny=tiny.gguf
echo "worker_id: night-1" >> "$CONFIG"

start_daemon
wait_for 10 "the daemon to be ready" grep -q "ready:" "$WORK/daemon.log"
first=$(ns submit --config "$CONFIG" --model tiny --max-tokens 3 --ignore-eos "before the reload")
wait_for 10 "job $first" state_is "$first" done
expect_contains "$(cat "$WORK/daemon.log")" "job $first running" "info lines before the reload"

# Add a model, quieten the log, and change two keys that need a restart.
write_config tiny=tiny.gguf second=second.gguf
{
  echo "worker_id: night-2"
  echo "log_level: warn"
  echo "busy_timeout_ms: 1000"
} >> "$CONFIG"
kill -HUP "$DAEMON_PID"
wait_for 10 "the reload to be logged" grep -q "worker_id, busy_timeout_ms changed but only take effect after a restart" \
  "$WORK/daemon.log"
expect_contains "$(cat "$WORK/daemon.log")" "reloaded: changed models, log_level (applies from the next job)" \
  "what was applied"
second=$(ns submit --config "$CONFIG" --model second --max-tokens 3 --ignore-eos "a model added at run time")
wait_for 10 "job $second" state_is "$second" done
expect_eq "$(sql "SELECT worker FROM jobs WHERE id = $second")" "night-1" "the worker id needs a restart"
grep -q "job $second running" "$WORK/daemon.log" && fail "log_level warn did not apply: info lines still logged"

# A broken config: refused, the daemon carries on with the running one.
printf 'models:\n  tiny: tiny.gguf\nthreads: lots\n' > "$CONFIG"
kill -HUP "$DAEMON_PID"
wait_for 10 "the failed reload to be logged" grep -q "config reload failed, the running config stays in effect" \
  "$WORK/daemon.log"
expect_contains "$(cat "$WORK/daemon.log")" "config.yaml:3: threads must be an integer, got 'lots'" "why it failed"
third=$(ns submit --db "$DB" --model second --max-tokens 3 --ignore-eos "still running on the old config")
wait_for 10 "job $third" state_is "$third" done

# A file caught half-written: `models:` with nothing under it, then a YAML
# syntax error. Both refused; jobs for the old config's models still run.
rejections() { grep -c "config reload failed, the running config stays in effect" "$WORK/daemon.log" || true; }
before=$(rejections)
printf 'database: q.db\nmodels:\n' > "$CONFIG"
kill -HUP "$DAEMON_PID"
wait_for 10 "the empty models: to be refused" bash -c "(( \$(grep -c 'config reload failed, the running config stays in effect' '$WORK/daemon.log') > $before ))"
expect_contains "$(cat "$WORK/daemon.log")" "models: is empty or missing (a half-written file?)" "why models: empty is refused"
before=$(rejections)
printf 'database: q.db\nmodels:\n  tiny: [tiny.gguf\n' > "$CONFIG"
kill -HUP "$DAEMON_PID"
wait_for 10 "the YAML error to be refused" bash -c "(( \$(grep -c 'config reload failed, the running config stays in effect' '$WORK/daemon.log') > $before ))"
fourth=$(ns submit --db "$DB" --model second --max-tokens 3 --ignore-eos "the half-written configs changed nothing")
wait_for 10 "job $fourth" state_is "$fourth" done
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state <> 'done'")" 0 "no job failed because of a bad reload"

kill -TERM "$DAEMON_PID"
wait_daemon 0
echo "ok"
