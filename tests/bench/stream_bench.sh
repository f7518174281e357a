#!/usr/bin/env bash
# Streaming-read bench: the disk's O_DIRECT sequential rate (fio), then our
# reader reading expert-sized ranges (2-25 MiB, random order) from a large
# generated file at several queue depths and chunk sizes, the pread fallback,
# and the page-cache (mmap) path, each as GiB/s and as a fraction of fio's
# rate (target: >= 85 %); how well reading hides behind compute; and decode
# steps through the expert cache on a DeepSeek-V2-Lite-shaped layout. Caches
# are dropped before every run. Not part of the test suite; needs root
# (drop_caches) and fio.
#
#   tests/bench/stream_bench.sh [BUILD_DIR]        (default: build, as scripts/build.sh makes it)
#   env: BENCH_DIR (where the file goes; default BUILD_DIR), SIZE_GIB (default 8),
#        READ_GIB (bytes read per run, default 1.5), ROUNDS (default 3), KEEP=1 (keep the file)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
bin=$build/engine/stream/ns_bench_stream
dir=${BENCH_DIR:-$build}
size_gib=${SIZE_GIB:-8}
read_gib=${READ_GIB:-1.5}

command -v fio >/dev/null || { echo "fio is not installed: apt-get install fio" >&2; exit 2; }
[ -x "$bin" ] || { echo "$bin not built: cmake --build $build --target ns_bench_stream" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
  echo "not root: cannot drop the page cache between runs, so the mmap figure would be meaningless" >&2
  exit 2
fi
avail_kib=$(df -Pk "$dir" | awk 'NR == 2 { print $4 }')
need_kib=$(( (size_gib + 2) * 1024 * 1024 ))
if [ "$avail_kib" -lt "$need_kib" ]; then
  echo "$dir has $((avail_kib / 1024 / 1024)) GiB free; the bench needs $((size_gib + 2)) GiB (set BENCH_DIR or SIZE_GIB)" >&2
  exit 2
fi

file=$dir/stream-bench.bin
[ "${KEEP:-0}" = 1 ] || trap 'rm -f "$file"' EXIT
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
gib_s() { awk '{ for (i = 1; i <= NF; ++i) if ($i ~ /^gib_s=/) { sub("gib_s=", "", $i); print $i } }'; }

echo "== disk: $(df -P "$dir" | awk 'NR == 2 { print $1 }'), filesystem $(stat -f -c %T "$dir"), kernel $(uname -r)"
if [ ! -f "$file" ] || [ "$(stat -c %s "$file")" != $((size_gib << 30)) ]; then
  echo "== writing a ${size_gib} GiB file ($file)"
  fio --name=gen --filename="$file" --size="${size_gib}G" --rw=write --bs=4M --direct=1 --ioengine=libaio \
      --iodepth=8 --refill_buffers --output-format=terse >/dev/null
fi

fio_read() {  # bs iodepth seconds -> GiB/s, sequential O_DIRECT from the start of the file
  drop
  fio --name=seq --filename="$file" --rw=read --bs="$1" --iodepth="$2" --direct=1 --ioengine=io_uring \
      --runtime="$3" --output-format=json |
    python3 -c 'import json,sys; print("%.4f" % (json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"] / 2**30))'
}
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", 100 * a / b }'; }

# This machine's disk rate drifts with everyone else's load, so every run of
# ours is paired with a fio run just before it, and the ratio is to that run.
echo "== fio, O_DIRECT sequential reads, for reference"
for cfg in "1M 16" "4M 8" "4M 16" "16M 4"; do
  set -- $cfg
  printf "  fio bs=%-3s iodepth=%-3s %7.3f GiB/s\n" "$1" "$2" "$(fio_read "$1" "$2" 6)"
done

# Each configuration alternates ROUNDS times: fio (bs=4M iodepth=16, 3 s),
# then ours (READ_GIB); the figure is the mean of ours over the mean of fio.
rounds=${ROUNDS:-3}
mean() { awk '{ s += $1 } END { printf "%.4f", s / NR }'; }
ours() {  # label, then ns_bench_stream read arguments
  local label=$1; shift
  local fios=() rates=() k
  for k in $(seq "$rounds"); do
    fios+=("$(fio_read 4M 16 3)")
    drop
    rates+=("$("$bin" read "$file" --bytes "${read_gib}GiB" --seed "$k" "$@" | grep '^RESULT' | gib_s)")
  done
  local f r; f=$(printf "%s\n" "${fios[@]}" | mean); r=$(printf "%s\n" "${rates[@]}" | mean)
  printf "  %-28s %6.3f GiB/s  (runs: %s)  fio %6.3f (runs: %s)  %5.1f %%\n" \
    "$label" "$r" "$(printf "%.2f " "${rates[@]}")" "$f" "$(printf "%.2f " "${fios[@]}")" "$(pct "$r" "$f")"
}

echo "== ns_bench_stream: expert-sized reads (2-25 MiB, random order, 8 submitted at a time)"
echo "   each vs fio bs=4M iodepth=16 run alternately with it ($rounds rounds); target >= 85 %"
ours "uring qd=16 chunk=1MiB" --mode uring --qd 16 --chunk 1MiB
for qd in 1 4 32; do ours "uring qd=$qd chunk=1MiB" --mode uring --qd "$qd" --chunk 1MiB; done
for chunk in 256KiB 4MiB; do ours "uring qd=16 chunk=$chunk" --mode uring --qd 16 --chunk "$chunk"; done
for qd in 4 16; do ours "pread threads=$qd chunk=1MiB" --mode pread --qd "$qd" --chunk 1MiB; done

echo "== page cache: the same ranges copied out of an mmap of the file"
ref=$(fio_read 4M 16 4)
drop
r=$("$bin" mmap "$file" --bytes 3GiB | grep '^RESULT' | gib_s)
printf "  %-30s %7.3f GiB/s   fio just before %6.3f GiB/s   %5.1f %%\n" "mmap + memcpy" "$r" "$ref" "$(pct "$r" "$ref")"

echo "== overlap: compute on each range while the others are read (uring qd=16 chunk=1MiB, 8 submitted)"
echo "   busy = share of the wall time with reads in flight: 100 % means compute never left the disk idle"
overlap() {  # compute ms per range, then extra arguments
  local ms=$1; shift
  drop
  "$bin" read "$file" --bytes 2GiB --mode uring --qd 16 --chunk 1MiB --compute-ms "$ms" "$@" | grep 'kind=overlap' |
    awk -v label="$ms ms/range $*" '{ for (i = 1; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] } }
         END { printf "  %-28s read only %.2f s, compute only %.2f s, both %.2f s, disk busy %3.0f %% (%.2f GiB/s while busy)\n",
                      label, v["read_only_s"], v["compute_only_s"], v["seconds"], 100 * v["busy_fraction"], v["busy_gib_s"] }'
}
for ms in 4 8 16; do overlap "$ms"; done
overlap 8 --io-nice 0

layers=$(( size_gib * 3 < 26 ? size_gib * 3 : 26 ))  # a layer of 64 x 3 x 1.62 MB is 0.29 GiB
echo "== expert cache: decode steps on a DeepSeek-V2-Lite-shaped layout over the file"
echo "   ($layers MoE layers, 64 experts of 3 x 1.62 MB, top-6, uniform routing, 2 GiB of slots)"
for args in "--policy lru" "--policy lfu" "--policy lfu --compute-ms 1"; do
  ref=$(fio_read 4M 16 3)
  drop
  # shellcheck disable=SC2086
  "$bin" cache "$file" --layers "$layers" --tokens 12 --capacity 2GiB $args | grep '^RESULT' |
    awk -v label="$args" -v ref="$ref" '{ for (i = 1; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] } }
         END { printf "  %-28s %.2f tok/s, hits %4.1f %% (%d of %d experts fit), %.3f GiB/s while reading = %5.1f %% of fio (%.3f), disk busy %3.0f %%\n",
                      label, v["tok_s"], 100 * v["hit_rate"], v["capacity"], v["of"], v["busy_gib_s"],
                      100 * v["busy_gib_s"] / ref, ref, 100 * v["busy_fraction"] }'
done
