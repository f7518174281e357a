#!/usr/bin/env bash
# The main job, end to end on a fresh Debian 12 machine: install, build,
# generate a small demo model, queue a few jobs, let nightshiftd drain the
# queue, print the results from the database.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/install-deps.sh
scripts/build.sh

demo=$root/demo
mkdir -p "$demo"
bin=$root/build
model=$demo/demo-moe-q8_0.gguf
if [ ! -f "$model" ]; then
  echo "== generating a small Mixtral-style MoE model (random weights) =="
  "$bin/tools/nightshift-make-model" --arch llama --n-embd 256 --n-layer 4 --n-head 8 --n-head-kv 4 --n-ff 512 \
    --n-expert 8 --n-expert-used 2 --type Q8_0 --seed 7 --name demo-moe --out "$model"
fi

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
ns submit --config "$demo/config.yaml" --model demo --max-tokens 32 --temperature 0 "Once upon a time"
ns submit --config "$demo/config.yaml" --model demo --max-tokens 32 --temperature 0.8 --seed 42 --priority 5 \
  "The night shift begins when the office empties."
ns submit --config "$demo/config.yaml" --model demo --max-tokens 24 --temperature 0.7 --top-p 0.9 --seed 1 \
  "Dear diary, today the queue"
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
