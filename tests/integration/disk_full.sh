# The database on a full filesystem (a 1 MiB tmpfs mounted for the test):
# `nightshift submit` fails with exit 1 naming the full disk, the daemon
# waits and retries instead of exiting or losing work, and once space is
# freed every job finishes once and the file passes PRAGMA integrity_check.
# Needs root for the mount; skipped (exit 77) otherwise.
source "$(dirname "$0")/lib.sh"

mkdir "$WORK/small"
if [[ "$(id -u)" != 0 ]] || ! mount -t tmpfs -o size=1m tmpfs "$WORK/small" 2> "$WORK/mount.err"; then
  echo "SKIP: cannot mount a small tmpfs here (needs root): $(cat "$WORK/mount.err" 2>/dev/null)"
  exit 77
fi
CLEANUP_EXTRA="umount -l '$WORK/small'"
make_model tiny.gguf
write_config tiny=tiny.gguf
sed -i 's#^database: q.db$#database: small/q.db#' "$CONFIG"
DB="$WORK/small/q.db"

for i in 1 2 3; do echo "A full disk, night $i"; done > "$WORK/prompts.txt"
ns submit --config "$CONFIG" --model tiny --max-tokens 4 --ignore-eos --prompt-lines "$WORK/prompts.txt" > /dev/null
dd if=/dev/zero of="$WORK/small/filler" bs=4k 2> /dev/null || true  # until the filesystem is full
echo "filled the 1 MiB filesystem: $(df --output=avail -B1 "$WORK/small" | tail -1) bytes left"

head -c 65536 /dev/zero | tr '\0' 'y' > "$WORK/big.txt"
# --any-model: the config check would refuse this prompt as longer than the context before it reaches the disk.
expect_exit 1 ns submit --config "$CONFIG" --model tiny --any-model --prompt-file "$WORK/big.txt"
expect_contains "$OUT" "the disk is full" "submit on a full disk"
echo "submit on the full disk: $OUT" | cut -c1-300

start_daemon
wait_for 10 "the daemon to meet the full disk" grep -qE "cannot (claim a job|start on the database) yet" "$WORK/daemon.log"
sleep 0.5
kill -0 "$DAEMON_PID" || fail "the daemon exited on a full disk"
grep -E "cannot (claim a job|start on the database) yet" "$WORK/daemon.log" | head -n 1 | cut -c1-300

rm "$WORK/small/filler"
expect_eq "$(sql "SELECT count(*) FROM jobs")" 3 "the failed submit left nothing behind"
all_done() { [[ "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" == 3 ]]; }
wait_for 15 "the jobs to finish once space is back" all_done
kill -TERM "$DAEMON_PID"
wait_daemon 0
expect_eq "$(sql "SELECT count(*) FROM attempts")" 3 "one attempt per job"
expect_eq "$(sql "PRAGMA integrity_check")" "ok" "integrity after the full disk"
expect_exit 0 ns submit --config "$CONFIG" --model tiny --any-model --prompt-file "$WORK/big.txt"
echo "ok"
