#!/usr/bin/env bash
# Decode / prefill bench under a memory budget: a DeepSeek-V2-Lite shaped
# Q4_0 model (27 layers, 64 experts, top 6, 2 shared) several times larger
# than the budget, run with io_mode uring (our streaming, budget enforced by
# the engine) and io_mode mmap (the page-cache baseline, held to the same
# memory by a systemd-run scope with MemoryMax), against fio's O_DIRECT
# sequential read rate on the same file.
#
# Prints tok/s, bytes read per token, read rate as a fraction of fio's, and
# the uring/mmap ratio. Not run by ctest.
#
# Usage: tests/bench/decode_bench.sh BUILD_DIR [WORK_DIR] [BUDGET] [N_LAYER]
#   BUDGET: e.g. 2800MiB (default); N_LAYER: 27 (~8 GiB) by default; fewer
#   layers keep the ratio model/budget if you scale BUDGET with them.
# Routing spread (distinct experts per layer, busiest expert share) is not
# printed yet: it needs a routing hook in the engine (see the integration report).
set -euo pipefail

build=${1:?usage: decode_bench.sh BUILD_DIR [WORK_DIR] [BUDGET] [N_LAYER]}
work=${2:-/var/tmp/ns-decode-bench}
budget=${3:-2800MiB}
n_layer=${4:-27}
cli="$build/daemon/nightshift"
gen="$build/tools/nightshift-make-model"
command -v fio >/dev/null || { echo "fio is not installed: apt-get install fio" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq is not installed: apt-get install jq" >&2; exit 2; }
mkdir -p "$work"
model="$work/ds2lite-q4_0-L$n_layer.gguf"

flags=(--arch deepseek2 --n-embd 2048 --n-layer "$n_layer" --n-head 16 --n-head-kv 16 --n-ff 10944
       --n-expert 64 --n-expert-used 6 --n-ff-expert 1408 --n-shared-expert 2 --n-dense-lead 1
       --kv-lora-rank 512 --q-lora-rank 0 --qk-rope-dim 64 --qk-nope-dim 128 --v-head-dim 128
       --type Q4_0 --seed 1)
if [[ ! -f $model ]]; then
  size=$("$gen" "${flags[@]}" --print-size-only)
  free=$(df --output=avail -B1 "$work" | tail -1)
  (( free > size + (1 << 30) )) || { echo "not enough disk in $work: need $size bytes, have $free" >&2; exit 2; }
  echo "generating $model ($((size >> 20)) MiB)..."
  "$gen" "${flags[@]}" --out "$model.tmp" >/dev/null && mv "$model.tmp" "$model"
fi
model_bytes=$(stat -c %s "$model")
echo "model $((model_bytes >> 20)) MiB, budget $budget"

# fio: sequential O_DIRECT reads of the model file, 1 MiB blocks, 16 in flight.
fio_gib_s=$(fio --name=seq --filename="$model" --rw=read --bs=1M --iodepth=16 --direct=1 --ioengine=io_uring \
  --runtime=10 --time_based --output-format=json 2>/dev/null | jq '.jobs[0].read.bw_bytes / 1073741824')
echo "fio O_DIRECT sequential: $fio_gib_s GiB/s"

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "(cannot drop caches: run as root for cold runs)" >&2; }
budget_bytes=$(numfmt --from=iec "${budget%iB}" 2>/dev/null || echo "$budget")

run() {  # mode prompt n -> json stats
  local mode=$1 prompt=$2 n=$3
  drop_caches
  local cmd=("$cli" run -m "$model" --io-mode "$mode" --memory-budget "$budget" --temperature 0 -n "$n" --json
             --context 1024 "$prompt")
  if [[ $mode == mmap ]]; then
    if command -v systemd-run >/dev/null && systemd-run --scope --quiet -p MemoryMax="$budget_bytes" true 2>/dev/null; then
      cmd=(systemd-run --scope --quiet -p MemoryMax="$budget_bytes" -p MemorySwapMax=0 "${cmd[@]}")
    else
      echo "(no systemd-run scope here: mmap runs without a memory limit, so its page cache may hold the whole model)" >&2
    fi
  fi
  "${cmd[@]}" 2>/dev/null | jq -c .stats
}

long_prompt=$(printf 'The quick brown fox jumps over the lazy dog. %.0s' {1..20})
report() {  # label json
  local label=$1 j=$2
  jq -r --arg l "$label" --argjson fio "$fio_gib_s" '
    "\($l): prefill \(.prefill_tok_s|.*100|round/100) tok/s, decode \(.decode_tok_s|.*100|round/100) tok/s, " +
    "\((.bytes_read / ((.prompt_tokens + .completion_tokens)|if .>0 then . else 1 end) / 1048576)|.*10|round/10) MiB/token, " +
    "read \(.read_gib_s|.*100|round/100) GiB/s = \(if $fio > 0 then (.read_gib_s / $fio * 100|round) else 0 end)% of fio, " +
    "io wait \(.io_wait_ms|round) ms, compute \(.compute_ms|round) ms, cache hits \(.cache_hit_rate*100|round)%, " +
    "prefetch accuracy \(.prefetch_accuracy*100|round)%, peak RSS \(.peak_rss_bytes/1048576|round) MiB"' <<<"$j"
}
declare -A decode
for mode in uring mmap; do
  j=$(run "$mode" "$long_prompt" 32)
  report "$mode" "$j"
  decode[$mode]=$(jq .decode_tok_s <<<"$j")
done
echo "decode ratio uring/mmap: $(jq -n "${decode[uring]} / (if ${decode[mmap]} > 0 then ${decode[mmap]} else 1e-9 end) | .*100|round/100")"
