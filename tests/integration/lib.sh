# Shared helpers for the integration tests: each test sources this, gets a
# fresh work directory with a generated model and a config, and drives the
# real binaries. Paths come from CMake through the environment.
set -euo pipefail

: "${NIGHTSHIFT:?set by CMake: path of the nightshift binary}"
: "${NIGHTSHIFTD:?set by CMake: path of the nightshiftd binary}"
: "${MAKE_MODEL:?set by CMake: path of nightshift-make-model}"
: "${SQLITE3:?set by CMake: path of the sqlite3 shell}"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/nightshift-it-XXXXXX")
DB="$WORK/q.db"
CONFIG="$WORK/config.yaml"
DAEMON_PID=""
unset NIGHTSHIFT_DB

EXTRA_PIDS=()  # other background processes a test starts; killed at exit
cleanup() {
  if [[ -n "$DAEMON_PID" ]] && kill -0 "$DAEMON_PID" 2>/dev/null; then kill -KILL "$DAEMON_PID" || true; fi
  for pid in "${EXTRA_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  if [[ -n "${CLEANUP_EXTRA:-}" ]]; then eval "$CLEANUP_EXTRA" || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for log in "$WORK"/*.log; do
    [[ -f "$log" ]] || continue
    echo "--- $(basename "$log") ---" >&2
    tail -n 60 "$log" >&2
  done
  exit 1
}

expect_eq() {  # expect_eq ACTUAL EXPECTED WHAT
  [[ "$1" == "$2" ]] || fail "$3: expected '$2', got '$1'"
}

expect_contains() {  # expect_contains TEXT NEEDLE WHAT
  [[ "$1" == *"$2"* ]] || fail "$3: '$2' not found in: $1"
}

expect_exit() {  # expect_exit CODE COMMAND... (stdout+stderr kept in $OUT)
  local want=$1 got=0
  shift
  OUT=$("$@" 2>&1) || got=$?
  [[ "$got" == "$want" ]] || fail "exit status $got (wanted $want) from: $* -> $OUT"
}

sql() {  # one query against the test database, '|' separated
  "$SQLITE3" -cmd ".timeout 5000" "$DB" "$@"
}

ns() { "$NIGHTSHIFT" "$@"; }

# `run` prints the bytes the model made; the daemon stores them as valid
# UTF-8 (a broken sequence becomes U+FFFD, as Python decodes it) and each NUL
# byte as U+FFFD too (jobs/valid_utf8.h, storable_text; bash would drop a NUL).
valid_utf8() {
  python3 -c 'import sys; sys.stdout.write(sys.stdin.buffer.read().decode("utf-8", "replace").replace("\0", "\ufffd"))'
}

# expect_result_is_run MODEL_FILE PROMPT WHAT: the one result's text and prompt
# tokens (a greedy 12-token job) equal `nightshift run` on PROMPT, the chat
# rendered as WHAT.
expect_result_is_run() {
  local model=$1 prompt=$2 what=$3 alone
  alone=$(ns run --model "$model" --threads 2 --max-tokens 12 --ignore-eos --temperature 0 --no-progress \
            "$prompt" 2>/dev/null | valid_utf8)
  expect_eq "$(sql "SELECT text FROM results")" "$alone" "chat job text vs run on the $what prompt"
  expect_eq "$(sql "SELECT prompt_tokens FROM results")" \
    "$(ns run --model "$model" --threads 2 --max-tokens 1 --temperature 0 --no-progress --json "$prompt" 2>/dev/null |
       python3 -c 'import json,sys; print(json.load(sys.stdin)["stats"]["prompt_tokens"])')" "prompt tokens"
}

# A small random llama model; extra arguments go to nightshift-make-model.
make_model() {
  local name=$1
  shift
  "$MAKE_MODEL" --out "$WORK/$name" --seed 1 "$@" > /dev/null
}

# make_header_only_model NAME FLAGS...: a real model's shape without its
# weights (make_model ... --header-only: a header over a sparse, all-zero data
# section); fails if the file takes disk space.
make_header_only_model() {
  make_model "$@" --header-only
  ((($(stat -c %b "$WORK/$1") * 512) < 64 * 1024 * 1024)) || fail "the header-only file $1 takes disk space"
}

# slow_model_config NAME [YAML LINE...]: a model slow enough that a long job is
# caught mid-run ($WORK/NAME.gguf: 256 wide, 8 layers) in a config that names
# it NAME, checkpoints every 16 tokens, and has the YAML lines given.
slow_model_config() {
  make_model "$1.gguf" --n-embd 256 --n-layer 8 --n-ff 768 --n-ctx 4096
  write_config "$1=$1.gguf"
  shift
  {
    echo "checkpoint_tokens: 16"
    echo "checkpoint_interval_ms: 0"
    printf '%s\n' "$@"
  } >> "$CONFIG"
}

# A config naming the models given as NAME=FILE (relative to $WORK). Retries
# wait 100 ms instead of 5 s so tests that retry stay fast.
write_config() {
  {
    echo "database: q.db"
    echo "poll_interval_ms: 50"
    echo "threads: 2"
    echo "retry_backoff_ms: 100"
    echo "models:"
    for m in "$@"; do echo "  ${m%%=*}: ${m#*=}"; done
  } > "$CONFIG"
}

start_daemon() {  # start_daemon [ARGS...]: nightshiftd in the background, log in $WORK/daemon.log
  # The log is emptied here, before the fork: a `>` on the background command
  # truncates it in the child, which may run after the caller's next wait_for
  # has matched the previous daemon's lines (integration.sigterm did, 1 run in ~10).
  : > "$WORK/daemon.log"
  "$NIGHTSHIFTD" --config "$CONFIG" "$@" >> "$WORK/daemon.log" 2>&1 &
  DAEMON_PID=$!
}

wait_pid() {  # wait_pid PID EXPECTED_STATUS [SECONDS]: a background process ends with that status
  local pid=$1 want=$2 status=0 deadline=$((SECONDS + ${3:-30}))
  while kill -0 "$pid" 2>/dev/null; do
    ((SECONDS < deadline)) || fail "process $pid still running after ${3:-30} s"
    sleep 0.02
  done
  wait "$pid" || status=$?
  [[ "$status" == "$want" ]] || fail "process $pid exited with $status, wanted $want"
}

wait_daemon() {  # wait_daemon EXPECTED_STATUS: within 30 s
  wait_pid "$DAEMON_PID" "$1" 30
  DAEMON_PID=""
}

now_ms() { date +%s%3N; }

wait_for() {  # wait_for SECONDS WHAT COMMAND...: poll until COMMAND succeeds
  local secs=$1 what=$2
  local deadline=$((SECONDS + secs))
  shift 2
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out after $secs s waiting for $what"
    sleep 0.05
  done
}

# wait_frozen SECONDS WHAT COMMAND...: as wait_for, but the daemon ($DAEMON_PID) runs in 50 ms slices and is
# stopped (SIGSTOP) while COMMAND looks, so what COMMAND saw still holds when this returns. The daemon is left
# stopped: the caller sends its signal, then `kill -CONT "$DAEMON_PID"`. For a cut that must land at a state:
# signalling after seeing it is a race that a loaded machine loses (choices_cut_postgres did, at load 19).
wait_frozen() {  # (it slows the daemon several times: wait_for near the state first)
  local secs=$1 what=$2
  local deadline=$((SECONDS + secs))
  shift 2
  kill -STOP "$DAEMON_PID"
  until "$@"; do
    if ((SECONDS >= deadline)); then
      kill -CONT "$DAEMON_PID"
      fail "timed out after $secs s waiting for $what"
    fi
    kill -CONT "$DAEMON_PID"
    sleep 0.05
    kill -STOP "$DAEMON_PID"
  done
}

job_state() { sql "SELECT state FROM jobs WHERE id = $1"; }
state_is() { [[ "$(job_state "$1")" == "$2" ]]; }

# A throwaway PostgreSQL server for this test (tests/support/pg_test_server.sh),
# stopped at exit: sets PG_URL and PG_DIR. Returns 77 with the reason in
# PG_SKIP where the server is not installed (the caller skips); fails otherwise.
start_pg_server() {
  local status=0
  # Not under $WORK: the server's user must be able to reach its directory.
  PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ns-pg-XXXXXX")
  CLEANUP_EXTRA="bash '$NS_SOURCE_DIR/tests/support/pg_test_server.sh' stop '$PG_DIR'"
  PG_URL=$(bash "$NS_SOURCE_DIR/tests/support/pg_test_server.sh" start "$PG_DIR" $$ 2> "$WORK/pg-start.err") ||
    status=$?
  if [[ "$status" == 77 ]]; then
    PG_SKIP=$(cat "$WORK/pg-start.err")
    return 77
  fi
  [[ "$status" == 0 ]] || fail "could not start a PostgreSQL server: $(cat "$WORK/pg-start.err")"
  command -v psql > /dev/null || fail "psql not found (Debian package postgresql-client)"
}
pgq() { psql "$PG_URL" -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }  # one query against it
