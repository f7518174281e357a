# examples/nightly-continuation/try-it.sh, the walk-through a new user runs
# first, works with this build: it queues the sample documents once (the
# second submit queues nothing), drains them, and exports one continuation
# per document under the mirrored relative path.
source "$(dirname "$0")/lib.sh"
: "${NS_SOURCE_DIR:?set by CMake: the source tree}"

out=$(NIGHTSHIFT="$NIGHTSHIFT" NIGHTSHIFTD="$NIGHTSHIFTD" MAKE_MODEL="$MAKE_MODEL" \
      "$NS_SOURCE_DIR/examples/nightly-continuation/try-it.sh" "$WORK/try" 2>&1) || fail "try-it.sh failed: $out"
expect_contains "$out" "batch nightly: 2 documents in notes, 2 new jobs, 0 already in the batch, 0 not queued" "evening"
expect_contains "$out" "batch nightly: 2 documents in notes, 0 new jobs, 2 already in the batch (2 queued), 0 not queued" "the timer again"
expect_contains "$out" "queue: 0 queued, 0 running, 2 done" "morning status"
expect_contains "$out" "batch nightly: 2 written, 0 unchanged, 0 failed, 0 not finished yet" "morning export"
for f in chapter-one.continued.md journal/monday.continued.txt; do
  [[ -s "$WORK/try/continued/$f" ]] || fail "try-it.sh did not write continued/$f"
done
expect_eq "$(find "$WORK/try/continued" -type f | wc -l)" 2 "one file per document"
# The sample notes in the source tree are left alone.
[[ -z "$(find "$NS_SOURCE_DIR/examples/nightly-continuation/notes" -name '*.continued.*')" ]] || fail "try-it.sh wrote into the source tree"
echo "ok"
