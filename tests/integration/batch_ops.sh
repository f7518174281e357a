# Recovering from a bad night with batch operations: the nightly timer queued
# a folder under a wrong model name; the daemon leaves those jobs queued
# (its config lacks the name, and the drain exits 3); one `retry --batch --model`
# move the whole batch to the right model, and several ids work at once.
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
write_config tiny=tiny.gguf
mkdir -p "$WORK/docs"
for n in one two three; do echo "Document $n." > "$WORK/docs/$n.md"; done
# (--any-model: as from a timer whose environment names a model its --config lacks)
ns submit --config "$CONFIG" --model tinny --any-model --max-tokens 3 --ignore-eos --dir "$WORK/docs" --batch nightly > /dev/null
start_daemon --drain
wait_daemon 3  # a night that left jobs held is not a success
expect_eq "$(sql "SELECT group_concat(state) FROM jobs WHERE batch = 'nightly'")" "queued,queued,queued" \
  "a night under a wrong model name leaves the jobs queued"
expect_contains "$(cat "$WORK/daemon.log")" "jobs it cannot serve are left queued: model tinny" "the drain says so"

# Submitting the folder again (by hand, with the right name) runs nothing twice: it says what it found and the
# one command that moves the held jobs (it said "3 already queued" before).
expect_exit 0 ns submit --config "$CONFIG" --model tiny --max-tokens 3 --ignore-eos --dir "$WORK/docs" --batch nightly
expect_contains "$OUT" "0 new jobs, 3 already in the batch (3 held), 0 not queued" "a resubmission names the state"
expect_contains "$OUT" "nightshift retry --batch nightly --model NAME" "and the command that fixes it"

# One command moves the held batch: retry --model takes queued jobs too, and checks the new name.
expect_exit 4 ns retry --config "$CONFIG" --batch nightly --model tinyy
expect_contains "$OUT" "did you mean 'tiny'?" "retry --model checks the name against the config"
expect_eq "$(grep -c "not moved" <<< "$OUT")" 1 "the typo is said once, not once a job"
expect_contains "$OUT" "3 jobs (" "with the count of jobs"
expect_eq "$(sql "SELECT group_concat(state || ':' || model) FROM jobs WHERE batch = 'nightly'")" \
  "queued:tinny,queued:tinny,queued:tinny" "a refused model moves nothing"
expect_exit 0 ns retry --config "$CONFIG" --batch nightly --model tiny
expect_contains "$OUT" "queued again on model tiny" "retry --model says so"
expect_eq "$(sql "SELECT group_concat(state || ':' || model) FROM jobs WHERE batch = 'nightly'")" \
  "queued:tiny,queued:tiny,queued:tiny" "retry --batch --model moves the held batch to the right model"
start_daemon --drain
wait_daemon 0
expect_eq "$(sql "SELECT group_concat(state) FROM jobs WHERE batch = 'nightly'")" "done,done,done" "the batch ran"

# Several ids at once; one unknown id is named and makes the exit status 3.
a=$(ns submit --config "$CONFIG" --model tiny "a")
b=$(ns submit --config "$CONFIG" --model tiny "b")
expect_exit 0 ns cancel --config "$CONFIG" "$a" "$b"
expect_eq "$(job_state "$a"),$(job_state "$b")" "cancelled,cancelled" "cancel of several ids"
expect_exit 3 ns retry --config "$CONFIG" "$a" 999 "$b"
expect_contains "$OUT" "no job 999 in this database" "the unknown id is named"
expect_eq "$(job_state "$a"),$(job_state "$b")" "queued,queued" "the known ids were retried"
expect_exit 1 ns cancel --config "$CONFIG" "$a" "$(sql "SELECT min(id) FROM jobs")"
expect_contains "$OUT" "is already done; nothing to cancel" "a finished job among several is named"

# Usage mistakes.
expect_exit 2 ns cancel --config "$CONFIG"
expect_exit 2 ns cancel --config "$CONFIG" "$a" --batch nightly
expect_exit 2 ns retry --config "$CONFIG" "$a" --state failed
expect_exit 2 ns retry --config "$CONFIG" --batch nightly --state finished
expect_exit 3 ns cancel --config "$CONFIG" --batch no-such-batch
expect_exit 0 ns retry --config "$CONFIG" --batch nightly
expect_contains "$OUT" "batch nightly has no failed or dead or cancelled job" "nothing to retry is said"
echo "ok"
