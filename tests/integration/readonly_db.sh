# list, show, status and export read a database this user may only read (a
# read-only mount, another user's file) instead of failing on the WAL switch;
# submit still refuses with the reason.
source "$(dirname "$0")/lib.sh"

make_model tiny.gguf
write_config tiny=tiny.gguf
echo '{"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"model": "tiny", "prompt": "Hello there", "max_tokens": 4}}' > "$WORK/ro.jsonl"
ns submit --config "$CONFIG" --jsonl "$WORK/ro.jsonl" --batch ro > /dev/null
"$NIGHTSHIFTD" --config "$CONFIG" --drain > "$WORK/daemon.log" 2>&1 || fail "the drain failed"
chmod 0644 "$WORK/q.db"
if [[ $(id -u) == 0 ]]; then
  command -v setpriv > /dev/null || { echo "skipped: needs setpriv (util-linux) to drop root"; exit 77; }
  chmod 0755 "$WORK"
  as_reader() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
else
  chmod 0555 "$WORK"   # the directory: no -wal/-shm can be made
  chmod 0444 "$WORK/q.db"
  as_reader() { "$@"; }
fi
trap 'chmod 0755 "$WORK" 2>/dev/null; cleanup' EXIT

expect_exit 0 as_reader "$NIGHTSHIFT" list --db "$WORK/q.db"
expect_contains "$OUT" "done" "list shows the finished job"
expect_exit 0 as_reader "$NIGHTSHIFT" show --db "$WORK/q.db" 1
expect_contains "$OUT" "job 1: done" "show reads it"
expect_exit 0 as_reader "$NIGHTSHIFT" status --db "$WORK/q.db"
expect_exit 0 as_reader "$NIGHTSHIFT" export --db "$WORK/q.db" --batch ro --jsonl -
expect_contains "$OUT" '"custom_id"' "export writes the batch's results"
expect_exit 1 as_reader "$NIGHTSHIFT" submit --db "$WORK/q.db" --model tiny "x"
expect_contains "$OUT" "read-only" "submit says why it cannot write"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 1 "nothing was written"
echo "ok"
