# memory_budget 0 under a cgroup memory limit (systemd MemoryMax=, a
# container): the daemon plans within the limit minus headroom, and the plan
# says the number came from the cgroup. Needs root and a writable cgroup
# memory controller (v1 memory/ or v2); skipped (77) elsewhere.
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
[[ -n "$group" ]] || { echo "skipped: cannot create a memory cgroup here (needs root and a writable cgroup fs)"; exit 77; }
CLEANUP_EXTRA="rmdir '$group'"
if [[ -f "$group/memory.limit_in_bytes" ]]; then
  echo $((3 * 1024 * 1024 * 1024)) > "$group/memory.limit_in_bytes"
elif [[ -f "$group/memory.max" ]]; then
  echo $((3 * 1024 * 1024 * 1024)) > "$group/memory.max"
else
  echo "skipped: $group has no memory limit file (memory controller not enabled for it)"
  exit 77
fi

make_model tiny.gguf
write_config tiny=tiny.gguf
id=$(ns submit --config "$CONFIG" --model tiny --max-tokens 2 --ignore-eos "inside a cgroup")
# The daemon joins the group before exec, so the limit applies from its first byte.
: > "$WORK/daemon.log"  # emptied before the fork (lib.sh start_daemon)
bash -c 'echo $$ > "$1/cgroup.procs" && exec "$2" --config "$3" --drain' _ "$group" "$NIGHTSHIFTD" "$CONFIG" \
  >> "$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
wait_daemon 0
expect_eq "$(job_state "$id")" done "the job under the cgroup limit"
log=$(cat "$WORK/daemon.log")
# 3 GiB minus max(10 %, 512 MiB) = 2.50 GiB.
expect_contains "$log" "memory_budget 0: planning with 2.50 GiB: cgroup limit 3.00 GiB minus 512.00 MiB headroom" \
  "the log names the cgroup limit"
expect_contains "$log" "(memory_budget 2.50 GiB: cgroup limit 3.00 GiB" "the plan names where its budget came from"
echo "ok"
