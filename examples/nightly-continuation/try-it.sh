#!/usr/bin/env bash
# The nightly continuation workflow in one go, on this machine, without
# systemd: a copy of the sample notes/, a small random-weight model (its text
# is gibberish: the point is the workflow), the evening's submit (twice: the
# second queues nothing), the night's `nightshiftd --drain`, the morning's
# status and export.
#
#   examples/nightly-continuation/try-it.sh [WORKDIR]      (default: a new folder under /tmp)
#
# Binaries: $NIGHTSHIFT, $NIGHTSHIFTD, $MAKE_MODEL, else the ones in build/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
NIGHTSHIFT=${NIGHTSHIFT:-$root/build/daemon/nightshift}
NIGHTSHIFTD=${NIGHTSHIFTD:-$root/build/daemon/nightshiftd}
MAKE_MODEL=${MAKE_MODEL:-$root/build/tools/nightshift-make-model}
for bin in "$NIGHTSHIFT" "$NIGHTSHIFTD" "$MAKE_MODEL"; do
  [[ -x "$bin" ]] || { echo "try-it: $bin is missing: build first (scripts/build.sh)" >&2; exit 1; }
done
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/nightshift-nightly-XXXXXX")}
mkdir -p "$work"
cd "$work"
rm -rf notes continued nightshift.db nightshift.db-wal nightshift.db-shm
cp -r "$here/notes" notes

echo "== a model and a config (in $work)"
[[ -f demo.gguf ]] || "$MAKE_MODEL" --out demo.gguf --seed 7 --name demo > /dev/null
cat > config.yaml <<YAML
database: nightshift.db
models:
  demo: demo.gguf
poll_interval_ms: 100
YAML

echo "== evening: one job per document (the timer runs this)"
"$NIGHTSHIFT" submit --config config.yaml --dir notes --model demo --max-tokens 48 --batch nightly
echo "== the timer fires again: nothing is queued twice"
"$NIGHTSHIFT" submit --config config.yaml --dir notes --model demo --max-tokens 48 --batch nightly

echo "== night: the daemon works through the queue (the service runs this)"
"$NIGHTSHIFTD" --config config.yaml --drain --log-level warn

echo "== morning: what happened"
"$NIGHTSHIFT" status --config config.yaml
echo "== morning: each continuation next to its document's name"
"$NIGHTSHIFT" export --config config.yaml --dir continued --batch nightly
find continued -type f | sort
echo "--- continued/chapter-one.continued.md ---"
cat continued/chapter-one.continued.md
echo
if command -v sqlite3 > /dev/null; then
  echo "== the same in the database (sqlite3 nightshift.db)"
  sqlite3 -readonly -box nightshift.db "SELECT id, state, custom_id, tokens, tok_s FROM job_summary WHERE batch = 'nightly'"
fi
echo "== done: the files are in $work"
