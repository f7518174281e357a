# Issue #30 G: an explicit memory_budget above the cgroup's memory limit is
# warned about at daemon start and by `nightshift model info`, naming both
# figures and the fix (before: no word, then OOM kills mid-batch). Needs root
# and a writable cgroup memory controller (v1 memory/ or v2); skipped (77)
# elsewhere.
source "$(dirname "$0")/lib.sh"

group=""
for base in /sys/fs/cgroup/memory /sys/fs/cgroup; do
  if [[ -f "$base/cgroup.procs" && ( -f "$base/memory.limit_in_bytes" || -f "$base/cgroup.subtree_control" ) ]]; then
    if mkdir "$base/nightshift-it-$$" 2>/dev/null; then
      group="$base/nightshift-it-$$"
      break
    fi
  fi
done
[[ -n "$group" ]] || {
  echo "skipped: cannot create a memory cgroup here (needs root and a writable cgroup fs)"
  exit 77
}
CLEANUP_EXTRA="rmdir '$group'"
limit=$((512 * 1024 * 1024))
if [[ -f "$group/memory.limit_in_bytes" ]]; then
  echo "$limit" > "$group/memory.limit_in_bytes"
elif [[ -f "$group/memory.max" ]]; then
  echo "$limit" > "$group/memory.max"
else
  echo "skipped: $group has no memory limit file (memory controller not enabled for it)"
  exit 77
fi
in_group() { bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' _ "$group" "$@"; }

make_model tiny.gguf
write_config tiny=tiny.gguf
echo "memory_budget: 1GiB" >> "$CONFIG"
warning="memory_budget 1.00 GiB is more than this process's cgroup limit 512.00 MiB"
fix="set memory_budget to at most 256.00 MiB (or 0: the limit minus headroom), or raise the cgroup's limit"

# The daemon, started inside the group (nothing queued: it drains at once).
: > "$WORK/daemon.log"
in_group "$NIGHTSHIFTD" --config "$CONFIG" --drain >> "$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
wait_daemon 0
log=$(cat "$WORK/daemon.log")
expect_contains "$log" "$warning" "the daemon's start names the budget and the limit"
expect_contains "$log" "$fix" "and the fix"

# model info, inside the group: text and JSON.
expect_exit 0 in_group "$NIGHTSHIFT" model info "$WORK/tiny.gguf" --memory-budget 1GiB
expect_contains "$OUT" "warning: $warning" "model info's warning"
expect_exit 0 in_group "$NIGHTSHIFT" model info "$WORK/tiny.gguf" --memory-budget 1GiB --json
expect_contains "$OUT" "\"warning\": \"$warning" "model info --json"

# Within the limit, or outside the group: no warning.
expect_exit 0 in_group "$NIGHTSHIFT" model info "$WORK/tiny.gguf" --memory-budget 256MiB
[[ "$OUT" != *"is more than"* ]] || fail "a budget within the limit is warned about: $OUT"
sed -i 's/^memory_budget: 1GiB/memory_budget: 256MiB/' "$CONFIG"
: > "$WORK/daemon.log"
in_group "$NIGHTSHIFTD" --config "$CONFIG" --drain >> "$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
wait_daemon 0
[[ "$(cat "$WORK/daemon.log")" != *"is more than"* ]] || fail "a budget within the limit is warned about at start"
echo "ok"
