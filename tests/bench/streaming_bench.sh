#!/usr/bin/env bash
# Weight streaming under a memory budget (issue 7), in one run:
#   1. generates (or reuses) a DeepSeek-V2-Lite-shaped Q4_0 model (27 layers,
#      64 experts top-6, 2 shared, ~8 GiB) under WORK_DIR, never in the repo;
#   2. measures the disk with fio (O_DIRECT sequential reads of that file);
#   3. prints the model's routing spread over 64 random tokens (distinct
#      experts per layer, busiest expert's share, entropy): random weights must
#      route like a trained model or every cache figure is meaningless;
#   4. decodes and prefills with io_mode uring (the engine holds the budget)
#      and io_mode mmap (the page-cache baseline, held to the same memory by a
#      memory cgroup: v1 memory.limit_in_bytes or v2 memory.max; without one
#      it warns loudly and runs unlimited);
#   5. prints tok/s, bytes per token, read GiB/s while reading as % of fio,
#      peak RSS vs the budget, the uring/mmap ratios, and the targets.
# Not run by ctest. Needs root (cgroup, drop_caches), fio and jq.
#
# Usage: tests/bench/streaming_bench.sh [BUILD_DIR] [WORK_DIR] [BUDGET] [N_LAYER]
#   BUILD_DIR default build; WORK_DIR default /var/tmp/ns-bench; BUDGET default
#   2700MiB (the model is then 3.04x the budget); N_LAYER default 27 (~8 GiB; fewer layers: scale BUDGET with them).
#   env: DECODE_TOKENS (8), PROMPT_TOKENS (8: the decode runs' prompt),
#        PREFILL_TOKENS (64: the prefill runs' prompt), MMAP_DECODE_TOKENS (4).
#   LOWBIT=1 (issue 16) runs this instead: decode tok/s of one smaller deepseek2 shape with its routed experts
#   in Q4_0 and in IQ2_XXS (bench_lowbit_model; BUDGET default 100MiB, N_LAYER 5: ~264 and ~146 MiB), both
#   streamed with io_mode uring under the same budget in the same run, and the ratio; needs no fio.
# Build first: cmake --build BUILD_DIR --target ns_bench_batch nightshift-make-model
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/bench_lib.sh
bench_args 2700MiB 27 "$@"
bench_env DECODE_TOKENS=8 PROMPT_TOKENS=8 PREFILL_TOKENS=64 MMAP_DECODE_TOKENS=4

if [[ ${LOWBIT:-0} == 1 ]]; then
  budget=${3:-100MiB} n_layer=${4:-5}
  command -v jq >/dev/null || { echo "jq is not installed: apt-get install jq" >&2; exit 2; }
  for bin in "$bench" "$gen"; do [[ -x $bin ]] || { echo "$bin is not built" >&2; exit 2; }; done
  echo "== routed experts Q4_0 vs IQ2_XXS, io_mode uring, budget $budget, batch 1, $decode_tokens tokens"
  echo "   machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, load $(cut -d' ' -f1-3 /proc/loadavg)"
  declare -A T
  for type in Q4_0 IQ2_XXS; do
    model=$(bench_lowbit_model "$work" "$n_layer" "$type")
    drop_caches
    r=$("$bench" decode "$model" --batch 1 --prompt-tokens "$prompt_tokens" --tokens "$decode_tokens" \
          --io-mode uring --budget "$budget" --threads "$(nproc)" 2>/dev/null | grep '^RESULT')
    T[$type]=$(kv tok_s <<<"$r")
    printf "%-8s %4d MiB file: %7.3f tok/s, %6.1f MiB read/step, hit rate %.2f, io wait %3.0f%%, peak RSS %s MiB\n" \
      "$type" "$(( $(stat -c %s "$model") >> 20 ))" "${T[$type]}" "$(jq -n "$(kv bytes_per_step <<<"$r") / 1048576")" \
      "$(kv hit_rate <<<"$r")" "$(jq -n "$(kv io_share <<<"$r") * 100")" "$(kv peak_rss_mib <<<"$r")"
  done
  echo "IQ2_XXS / Q4_0 decode: $(jq -n "${T[IQ2_XXS]} / ${T[Q4_0]} | .*100|round/100")x"
  exit 0
fi

for tool in fio jq; do command -v $tool >/dev/null || { echo "$tool is not installed: apt-get install $tool" >&2; exit 2; }; done
for bin in "$bench" "$gen"; do [[ -x $bin ]] || { echo "$bin is not built: cmake --build $build --target $(basename "$bin")" >&2; exit 2; }; done
[[ $(id -u) == 0 ]] || echo "WARNING: not root: no page-cache drops and no memory cgroup for the mmap baseline" >&2

model=$(bench_model "$work" "$n_layer")
budget_bytes=$(numfmt --from=iec "${budget%iB}")
model_bytes=$(stat -c %s "$model")
echo "== model $model: $((model_bytes >> 20)) MiB = $(jq -n "$model_bytes / $budget_bytes | .*10|round/10")x the budget of $budget"
echo "   machine: $(machine_line)"

fio_gib_s=$(bench_fio "$model" 6)
echo "== fio O_DIRECT sequential read (best of 1 MiB x 16, and 1 MiB x 16 / 4 MiB x 8 with registered buffers): $fio_gib_s GiB/s"

echo "== routing spread over 64 random tokens (target: ~55-62 of 64 experts per layer)"
"$bench" spread "$model" --budget "$budget" --tokens 64 2>/dev/null | grep -v '^  layer' | sed 's/^/   /'

run_mode() {  # mode what -> RESULT line
  local mode=$1 what=$2 args=()
  if [[ $what == decode ]]; then
    args=(decode "$model" --batch 1 --prompt-tokens "$prompt_tokens" --disk-gib-s "$fio_gib_s"
          --tokens "$([[ $mode == mmap ]] && echo "$mmap_decode_tokens" || echo "$decode_tokens")")
  else
    args=(prefill "$model" --prompt-tokens "$prefill_tokens")
  fi
  args+=(--io-mode "$mode" --budget "$budget")
  drop_caches
  if [[ $mode == mmap ]]; then
    in_memory_cgroup "$budget_bytes" "$bench" "${args[@]}" 2>&1 >"$work/out.$$" | grep -v '^\[' >&2 || true
  else
    "$bench" "${args[@]}" >"$work/out.$$" 2>/dev/null
  fi
  grep '^RESULT' "$work/out.$$"
  rm -f "$work/out.$$"
}

declare -A R
for mode in uring mmap; do
  for what in decode prefill; do
    echo "== $what, io_mode $mode$([[ $mode == mmap ]] && echo ", memory cgroup of $budget")..." >&2
    R[$mode.$what]=$(run_mode "$mode" "$what")
  done
done

pct() { jq -n "if $2 > 0 then $1 / $2 * 100 else 0 end | .*10|round/10"; }
ratio() { jq -n "if $2 > 0 then $1 / $2 else 0 end | .*100|round/100"; }
echo
echo "== results (budget $budget, model $((model_bytes >> 20)) MiB, fio $fio_gib_s GiB/s)"
for mode in uring mmap; do
  d=${R[$mode.decode]}; p=${R[$mode.prefill]}
  d_tok=$(kv tok_s <<<"$d"); p_tok=$(kv tok_s <<<"$p")
  bpt=$(jq -n "$(kv bytes_per_step <<<"$d") / 1048576 | round")
  rd=$(kv read_gib_s <<<"$d")
  printf "%-6s decode %7.3f tok/s (%s tokens), %5s MiB read/token, prefill %7.3f tok/s (%s tokens), " \
    "$mode" "$d_tok" "$(kv generated <<<"$d")" "$bpt" "$p_tok" "$(kv tokens <<<"$p")"
  if [[ $mode == uring ]]; then
    printf "read %.2f GiB/s while reading = %s%% of fio, io wait %s%%, peak RSS %s MiB (budget %s MiB)\n" "$rd" \
      "$(pct "$rd" "$fio_gib_s")" "$(jq -n "$(kv io_share <<<"$d") * 100 | round")" \
      "$(( $(kv peak_rss_mib <<<"$d") > $(kv peak_rss_mib <<<"$p") ? $(kv peak_rss_mib <<<"$d") : $(kv peak_rss_mib <<<"$p") ))" \
      "$((budget_bytes >> 20))"
  else
    printf "peak RSS %s MiB (page cache limited by the cgroup)\n" "$(kv peak_rss_mib <<<"$d")"
  fi
done
ud=$(kv tok_s <<<"${R[uring.decode]}"); md=$(kv tok_s <<<"${R[mmap.decode]}")
up=$(kv tok_s <<<"${R[uring.prefill]}"); mp=$(kv tok_s <<<"${R[mmap.prefill]}")
rd=$(kv read_gib_s <<<"${R[uring.decode]}")
rss=$(( $(kv peak_rss_mib <<<"${R[uring.decode]}") > $(kv peak_rss_mib <<<"${R[uring.prefill]}") ?
        $(kv peak_rss_mib <<<"${R[uring.decode]}") : $(kv peak_rss_mib <<<"${R[uring.prefill]}") ))
verdict() { jq -n "if $1 then \"PASS\" else \"FAIL\" end" -r; }
echo "uring/mmap: decode $(ratio "$ud" "$md")x, prefill $(ratio "$up" "$mp")x"
echo "targets: decode uring >= 10x mmap: $(ratio "$ud" "$md")x $(verdict "$(ratio "$ud" "$md") >= 10")" \
     "| read >= 85% of fio while reading: $(pct "$rd" "$fio_gib_s")% $(verdict "$(pct "$rd" "$fio_gib_s") >= 85")" \
     "| peak RSS <= budget: $rss MiB of $((budget_bytes >> 20)) $(verdict "$rss <= $((budget_bytes >> 20))")"
