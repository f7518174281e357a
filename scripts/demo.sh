#!/usr/bin/env bash
# The main job, end to end on a fresh Debian 12 machine: install, build,
# queue a few jobs for the small trained model in examples/models/, let
# nightshiftd drain the queue, print the results from the database.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/install-deps.sh
scripts/build.sh

demo=$root/demo
mkdir -p "$demo"
bin=$root/build
# kjv-moe: a small MoE trained on the King James Bible and fortune files (examples/models/README.md),
# the one model the repository carries, so the continuations below are real words.
model=$root/examples/models/kjv-moe-q4_0.gguf

cat > "$demo/config.yaml" <<YAML
# Demo configuration: see examples/config.yaml for every key.
database: $demo/queue.db
models:
  demo: $model
threads: 0
log_level: info
YAML

db=$demo/queue.db
rm -f "$db" "$db-wal" "$db-shm"
echo "== submitting jobs =="
ns() { "$bin/daemon/nightshift" "$@"; }
ns submit --config "$demo/config.yaml" --model demo --max-tokens 32 --temperature 0 "In the beginning God created"
ns submit --config "$demo/config.yaml" --model demo --max-tokens 32 --temperature 0.8 --seed 42 --priority 5 \
  "And the LORD said unto Moses,"
ns submit --config "$demo/config.yaml" --model demo --max-tokens 24 --temperature 0.7 --top-p 0.9 --seed 1 \
  --stop "." "A fool and his money"
echo "== a job naming a model the config does not have is refused at submit (exit 4) =="
if ns submit --config "$demo/config.yaml" --model no-such-model "This job names a model the config does not have."; then
  echo "demo: the submit of an unknown model was accepted" >&2
  exit 1
fi

echo "== running nightshiftd --drain =="
"$bin/daemon/nightshiftd" --config "$demo/config.yaml" --drain

echo "== results (nightshift list; open $db in any SQLite browser for more) =="
ns list --config "$demo/config.yaml"
for id in $(sqlite3 "$db" "SELECT id FROM jobs ORDER BY id"); do
  echo "--- job $id ---"
  ns show --config "$demo/config.yaml" "$id"
done
