#!/usr/bin/env bash
# Superseded by streaming_bench.sh (same arguments), which holds the mmap
# baseline to the budget with a memory cgroup (v1 or v2) instead of
# systemd-run, and also prints read rate vs fio, peak RSS and routing spread.
#
# Usage: tests/bench/decode_bench.sh [BUILD_DIR] [WORK_DIR] [BUDGET] [N_LAYER]
exec "$(dirname "$0")/streaming_bench.sh" "$@"
