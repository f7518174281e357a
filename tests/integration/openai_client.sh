# The OpenAI Batch and Files API of nightshiftd (daemon/http/) driven by the
# official OpenAI client (npm package `openai`, pinned in
# tests/integration/openai_client/, run with node): a file with a bad line
# refused, an upload, a batch whose third request names an unknown model
# (refused alone: in `errors` and the error file), polled until completed,
# output and error files downloaded, lists paged, a second batch cancelled,
# a file deleted; every object checked against the client's TypeScript types
# (check_batch_api.mjs). The output lines equal `nightshift export` of the
# batch, which `nightshift status` lists. The same calls with a wrong key get
# 401 and queue nothing; the key is never in the log. Skipped (77) without
# node or the package (scripts/install-deps.sh runs `npm ci` there).
# openai_client_postgres.sh runs the same on a PostgreSQL queue.
source "$(dirname "$0")/lib.sh"
BACKEND=${OPENAI_CLIENT_BACKEND:-sqlite}
CLIENT_DIR="$NS_SOURCE_DIR/tests/integration/openai_client"
command -v node > /dev/null || { echo "SKIP: node is not installed (apt install nodejs npm)"; exit 77; }
[[ -f "$CLIENT_DIR/node_modules/openai/package.json" ]] ||
  { echo "SKIP: the openai npm package is not installed: run scripts/install-deps.sh (npm ci in $CLIENT_DIR)"; exit 77; }

CHATML_TEMPLATE="{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
make_model chat.gguf --chat-template "$CHATML_TEMPLATE"
# `held` names a file that is not there: the daemon leaves its jobs queued (the batch to cancel).
write_config chat=chat.gguf held=absent.gguf
if [[ "$BACKEND" == postgres ]]; then
  start_pg_server || { echo "SKIP: $PG_SKIP"; exit 77; }
  sed -i "/^database: q.db$/d" "$CONFIG"
  echo "database: '$PG_URL'" >> "$CONFIG"
  QUEUE_DB=$PG_URL
  query() { pgq "$1"; }
else
  QUEUE_DB=$DB
  query() { sql "$1"; }
fi
KEY=ns-test-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
printf '# test keys\n%s\n' "$KEY" > "$WORK/keys"
cat >> "$CONFIG" <<YAML
http:
  listen: 127.0.0.1:0
  keys_file: keys
  models:
    gpt-4o-mini: chat
    gpt-held: held
YAML

listening() {  # the daemon is up and its HTTP service listens (fails at once if the daemon exited)
  kill -0 "$DAEMON_PID" 2> /dev/null || fail "nightshiftd exited"
  grep -q "listens on 127.0.0.1:" "$WORK/daemon.log"
}
port() { grep -o "listens on 127.0.0.1:[0-9]*" "$WORK/daemon.log" | head -1 | cut -d: -f2; }

start_daemon --log-level debug
wait_for 30 "the HTTP service to listen" listening
PORT=$(port)
BASE="http://127.0.0.1:$PORT/v1"

# A wrong key: 401 for every call, nothing stored or queued.
node "$CLIENT_DIR/check_batch_api.mjs" "$BASE" "ns-test-wrong-key-0123456789" "$WORK" wrong-key > "$WORK/wrong.log" 2>&1 ||
  fail "wrong key: $(cat "$WORK/wrong.log")"
expect_eq "$(query "SELECT (SELECT count(*) FROM jobs) || ' ' || (SELECT count(*) FROM api_files) || ' ' || (SELECT count(*) FROM api_batches)")" \
  "0 0 0" "a wrong key queues and stores nothing"

node "$CLIENT_DIR/check_batch_api.mjs" "$BASE" "$KEY" "$WORK" full > "$WORK/client.log" 2>&1 ||
  fail "the OpenAI client: $(cat "$WORK/client.log")"
cat "$WORK/client.log"
summary=$(tail -1 "$WORK/client.log")
BATCH=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["batch"])' "$summary")
CANCELLED=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["cancelled"])' "$summary")

# The batch is the queue's batch of that name: status lists it, export writes the same output lines.
expect_eq "$(query "SELECT custom_id || ':' || state || ':' || model FROM jobs WHERE batch = '$BATCH' ORDER BY id" | paste -sd" ")" \
  "first:done:chat second:done:chat" "the batch's jobs (the refused line queued nothing)"
expect_eq "$(query "SELECT count(*) FROM jobs WHERE batch = '$CANCELLED' AND state = 'cancelled'")" 2 "the cancelled batch's jobs"
expect_contains "$(ns status --db "$QUEUE_DB")" "$BATCH" "nightshift status lists the API's batch"
ns export --db "$QUEUE_DB" --batch "$BATCH" --jsonl "$WORK/export.jsonl" > /dev/null
python3 - "$WORK/export.jsonl" "$WORK/output.jsonl" <<'PY' || fail "the API's output file differs from nightshift export"
import json, sys
export = [json.loads(l) for l in open(sys.argv[1])]
output = [json.loads(l) for l in open(sys.argv[2])]
assert export == output, (export, output)
PY

grep -qF "$KEY" "$WORK/daemon.log" && fail "the API key is in the daemon's log"
grep -q "http: POST /v1/batches -> 200" "$WORK/daemon.log" || fail "requests are not logged at debug"
kill -TERM "$DAEMON_PID"
wait_daemon 0

# Restarted, the daemon serves the same files (they are in the database).
start_daemon
wait_for 30 "the HTTP service to listen again" listening
PORT=$(port)
OUT_ID=$(query "SELECT output_file_id FROM api_batches WHERE id = '$BATCH'")
python3 - "http://127.0.0.1:$PORT/v1" "$KEY" "$OUT_ID" "$WORK/output.jsonl" <<'PY' || fail "the output file after a restart"
import json, sys, urllib.request
base, key, file_id, saved = sys.argv[1:]
req = urllib.request.Request(f"{base}/files/{file_id}/content", headers={"Authorization": f"Bearer {key}"})
got = [json.loads(l) for l in urllib.request.urlopen(req).read().decode().splitlines()]
assert got == [json.loads(l) for l in open(saved)], got
PY
kill -TERM "$DAEMON_PID"
wait_daemon 0

# A daemon asked to listen beyond loopback without keys refuses to start (exit 2) and claims nothing.
sed -i -e 's/listen: 127.0.0.1:0/listen: 0.0.0.0:0/' -e '/keys_file:/d' "$CONFIG"
ns submit --db "$QUEUE_DB" --model chat "still queued" > /dev/null
expect_exit 2 "$NIGHTSHIFTD" --config "$CONFIG"
expect_contains "$OUT" "not a loopback address and no http.keys_file" "the refusal names the problem"
expect_eq "$(query "SELECT state FROM jobs WHERE prompt = 'still queued'")" "queued" "a config mistake leaves jobs queued"
echo "PASS"
