#!/usr/bin/env bash
# Batched decode and prefill under a memory budget (issue 4), in one run, on
# the same model and budget as streaming_bench.sh:
#   - decode with 1, 4, 16, 32, 64 concurrent sequences (distinct random
#     prompts, greedy, DECODE_TOKENS each), streaming under the budget;
#   - the same batches with a budget that holds the whole model in the expert
#     cache (warmed first): the "model in RAM" ceiling;
#   - the disk-bound ceiling of each batch: fio's rate / the bytes each of its
#     steps had to read;
#   - prefill of a 512-token prompt, streaming vs in RAM;
#   - batched greedy outputs vs the same prompts run alone (PASS/FAIL; also
#     prompt 0's tokens in every batch and in RAM vs the batch of one).
# Prints aggregate tok/s, ratio to 1 sequence, MiB read per step, both
# ceilings and the share of the lower one, and the issue's targets.
# Not run by ctest. Needs root (drop_caches), fio and jq; RAM for the in-RAM
# runs (RAM_BUDGET, default 12GiB).
#
# Usage: tests/bench/batch_bench.sh [BUILD_DIR] [WORK_DIR] [BUDGET] [N_LAYER]
#   defaults: build, /var/tmp/ns-bench, 2700MiB, 27
#   env: BATCHES (1,4,16,32,64), DECODE_TOKENS (8), PROMPT_TOKENS (8),
#        PREFILL_TOKENS (512), RAM_BUDGET (12GiB), VERIFY (2 prompts per batch)
# Build first: cmake --build BUILD_DIR --target ns_bench_batch nightshift-make-model
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/bench_lib.sh
bench_args 2700MiB 27 "$@"
bench_env BATCHES=1,4,16,32,64 DECODE_TOKENS=8 PROMPT_TOKENS=8 PREFILL_TOKENS=512 RAM_BUDGET=12GiB VERIFY=2

for tool in fio jq; do command -v $tool >/dev/null || { echo "$tool is not installed: apt-get install $tool" >&2; exit 2; }; done
for bin in "$bench" "$gen"; do [[ -x $bin ]] || { echo "$bin is not built: cmake --build $build --target $(basename "$bin")" >&2; exit 2; }; done

model=$(bench_model "$work" "$n_layer")
model_bytes=$(stat -c %s "$model")
budget_bytes=$(numfmt --from=iec "${budget%iB}")
largest=$(tr , '\n' <<<"$batches" | sort -n | tail -1)
echo "== model $model: $((model_bytes >> 20)) MiB, budget $budget; in-RAM runs with $ram_budget"
echo "   machine: $(machine_line)"
fio_gib_s=$(bench_fio "$model" 6)
echo "== fio O_DIRECT sequential read (best of three shapes): $fio_gib_s GiB/s"

common=(--tokens "$decode_tokens" --prompt-tokens "$prompt_tokens" --max-sequences "$largest" --disk-gib-s "$fio_gib_s")
# Each batch size streams and then runs in RAM right after, in separate
# processes (each its own budget and peak RSS): the load on this machine
# drifts from minute to minute, so the two figures a ratio needs are taken
# close together.
stream_out=""; ram_out=""
for n in ${batches//,/ }; do
  echo "== batch $n: decode streaming under $budget, then with the model in RAM..." >&2
  drop_caches
  out=$("$bench" decode "$model" "${common[@]}" --batch "$n" --budget "$budget" --verify "$verify" 2>/dev/null)
  grep '^decode' <<<"$out" | sed 's/^/   stream /'
  stream_out+="$out"$'\n'
  out=$("$bench" decode "$model" "${common[@]}" --batch "$n" --budget "$ram_budget" --warm-tokens 128 2>/dev/null)
  grep '^decode' <<<"$out" | sed 's/^/   RAM    /'
  ram_out+="$out"$'\n'
done
echo "== prefill of a $prefill_tokens-token prompt, streaming and in RAM..." >&2
drop_caches
pre_stream=$("$bench" prefill "$model" --prompt-tokens "$prefill_tokens" --budget "$budget" 2>/dev/null | grep '^RESULT')
pre_ram=$("$bench" prefill "$model" --prompt-tokens "$prefill_tokens" --budget "$ram_budget" --warm-tokens 128 2>/dev/null |
          grep '^RESULT')

echo
echo "== results: decode (aggregate over all sequences, decode steps only; ceilings per batch)"
printf "%6s %9s %8s %11s %11s %11s %11s %9s %8s %7s\n" batch "tok/s" "vs 1" "MiB/step" "disk ceil" "RAM ceil" \
  "lower" "of lower" "io wait" "outputs"
one=""; best_tok=0; best_pct=0; best_batch=0; at32=""
for n in ${batches//,/ }; do
  s=$(grep "^RESULT.* batch=$n " <<<"$stream_out"); r=$(grep "^RESULT.* batch=$n " <<<"$ram_out")
  tok=$(kv tok_s <<<"$s"); disk=$(kv disk_ceiling_tok_s <<<"$s"); ram=$(kv tok_s <<<"$r")
  [[ -n $one ]] || one=$tok
  lower=$(jq -n "[$disk, $ram] | min"); pct=$(jq -n "if $lower > 0 then $tok / $lower * 100 else 0 end")
  [[ $n == 32 ]] && at32=$tok
  # The best batch size: the highest aggregate rate.
  if jq -e -n "$tok > $best_tok" >/dev/null; then best_tok=$tok; best_pct=$pct; best_batch=$n; fi
  printf "%6s %9.3f %7.2fx %11.0f %11.3f %11.3f %11.3f %8.1f%% %7.0f%% %7s\n" "$n" "$tok" "$(jq -n "$tok / $one")" \
    "$(jq -n "$(kv bytes_per_step <<<"$s") / 1048576")" "$disk" "$ram" "$lower" "$pct" \
    "$(jq -n "$(kv io_share <<<"$s") * 100")" "$(kv verify <<<"$s")"
done
ps=$(kv tok_s <<<"$pre_stream"); pr=$(kv tok_s <<<"$pre_ram")
echo "prefill $(kv tokens <<<"$pre_stream") tokens: streaming $ps tok/s ($(kv steps <<<"$pre_stream") forward passes," \
     "$(jq -n "$(kv bytes <<<"$pre_stream") / 1073741824 | .*100|round/100") GiB read, io wait" \
     "$(jq -n "$(kv io_share <<<"$pre_stream") * 100 | round")%), in RAM $pr tok/s: $(jq -n "$ps / $pr * 1000 | round / 10")%"
peak=$(grep '^RESULT' <<<"$stream_out" | kv peak_rss_mib | sort -n | tail -1)
peak_pre=$(kv peak_rss_mib <<<"$pre_stream")
echo "peak RSS streaming: decode $peak MiB, prefill $peak_pre MiB (budget $((budget_bytes >> 20)) MiB)"
verdict() { jq -n -r "if $1 then \"PASS\" else \"FAIL\" end"; }
fails=$(grep -c 'verify=FAIL' <<<"$stream_out" || true)
# Prompt 0's tokens in every batch (and in RAM) against the batch of one.
h0=$(grep '^RESULT.* batch=1 ' <<<"$stream_out" | kv hash0)
if [[ -n $h0 ]]; then
  fails=$(( fails + $( (grep '^RESULT' <<<"$stream_out"; grep '^RESULT' <<<"$ram_out") | kv hash0 | grep -vc "^$h0$" || true) ))
fi
echo "targets:"
if [[ -n $at32 ]]; then
  echo "  32 sequences >= 4x one: $(jq -n "$at32 / $one | .*100|round/100")x $(verdict "$at32 / $one >= 4")"
  # Were both at their disk-bound rates, the ratio would be that of their ceilings:
  # the 32 sequences' union of experts per step against one token's.
  d1=$(kv disk_ceiling_tok_s <<<"$(grep '^RESULT.* batch=1 ' <<<"$stream_out")")
  d32=$(kv disk_ceiling_tok_s <<<"$(grep '^RESULT.* batch=32 ' <<<"$stream_out")")
  [[ -n $d1 ]] && echo "    (disk-bound limit of this ratio: ceiling at 32 / ceiling at 1 = $(jq -n "$d32 / $d1 | .*100|round/100")x)"
fi
echo "  best batch (highest tok/s) >= 60% of the lower ceiling: batch $best_batch at $(jq -n "$best_pct | round")%" \
     "$(verdict "$best_pct >= 60")"
echo "  prefill $prefill_tokens >= 80% of in-RAM prefill: $(jq -n "$ps / $pr * 1000 | round / 10")% $(verdict "$ps / $pr >= 0.8")"
echo "  batched greedy outputs == alone: $(verdict "$fails == 0")"
echo "  peak RSS <= budget: $(verdict "$peak <= $((budget_bytes >> 20)) and $peak_pre <= $((budget_bytes >> 20))")"
