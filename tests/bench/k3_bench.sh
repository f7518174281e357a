#!/usr/bin/env bash
# Kimi K3 at full width under a memory budget (issue 14), in one run:
#   1. generates (or reuses) a K3-shaped model: hidden 7168, 64 heads, 3 KDA :
#      1 MLA, Kimi K2's experts (384 routed, top-8, width 2048, one shared, a
#      dense first layer of 18432) as K3 has them: latent MoE (the routed
#      experts in a 4096-wide latent, ffn_routed_down/norm/up), attention
#      residuals, situ; MXFP4 experts, Q8_0 elsewhere, a small vocabulary.
#      N_LAYER 6 (one dense, five MoE, one of them MLA) is 26.5 GiB: 3.3x the 8 GiB budget;
#   2. `nightshift model info` at the budget: the plan, and the disk-bound
#      tok/s at 1 sequence and at the batch that touches every expert for
#      fio's rate (measured next: O_DIRECT sequential reads of the file);
#   3. the routing spread over 64 random tokens (distinct of 384 experts per
#      layer, busiest expert's share, entropy): random weights must route like
#      a trained model (MISSION.md, "Honest benchmark models");
#   4. nightshift decode with 1, 16, 32, 64 sequences streaming under the
#      budget (io_mode uring): aggregate tok/s, MiB read per step, the
#      disk-bound ceiling of each batch (its bytes per step / fio's rate), the
#      in-RAM ceiling (see below), peak RSS against the budget;
#   5. llama.cpp's llama-batched-bench (LLAMA_BIN_DIR) on the same file in a
#      memory cgroup of the same budget (mmap, -nr: no repack, so the weights
#      stay in the page cache the cgroup limits; -kvu: one KV buffer for all
#      sequences), the same batch sizes, LLAMA_DECODE_TOKENS tokens each (fewer
#      than ours: every step of a batch pages most of the file in again);
#   6. the ratios nightshift / llama.cpp and nightshift / each ceiling.
# The in-RAM ceiling: the model (~27 GiB) does not fit this machine's RAM, so
# it cannot be measured by holding it; it is the same decode steps without
# their I/O wait (tok/s / (1 - io wait share)): what the steps' compute
# allows, i.e. the rate with every expert already in memory.
# Not run by ctest. Needs root (cgroup, drop_caches), fio, jq, ~27 GiB of disk
# under WORK_DIR (delete the model when done: KEEP_MODEL=0 does).
#
# Usage: tests/bench/k3_bench.sh [BUILD_DIR] [WORK_DIR] [BUDGET] [N_LAYER] [LLAMA_BIN_DIR]
#   defaults: build, /var/tmp/ns-bench, 8GiB, 6, /var/tmp/ref/build/bin ("" skips llama.cpp)
#   env: BATCHES (1,16,32,64), DECODE_TOKENS (8), PROMPT_TOKENS (8), LLAMA_DECODE_TOKENS (4),
#        LLAMA_BATCHES (BATCHES), LLAMA_TIMEOUT (seconds, unset: none), VERIFY (0: batched vs alone prompts; each costs a run alone),
#        KEEP_MODEL (1: 0 deletes the model at the end), SHAPE (the width flags, replacing Kimi K2's below;
#        a small trial: SHAPE="--n-embd 512 --n-head 4 --n-ff 1024 --n-expert 32 --n-expert-used 8
#        --kda-head-dim 128 --kl-kv-lora-rank 256 --kl-qk-rope-dim 16 --kl-qk-nope-dim 128 --kl-v-head-dim 64
#        --kl-n-ff-expert 256 --expert-latent 256" with BUDGET ~ a third of the file)
# Build first: cmake --build BUILD_DIR --target ns_bench_batch nightshift nightshift-make-model
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/bench_lib.sh
bench_args 8GiB 6 "$@"
llama_bin=${5-/var/tmp/ref/build/bin}
bench_env BATCHES=1,16,32,64 DECODE_TOKENS=8 PROMPT_TOKENS=8 VERIFY=0
llama_batches=${LLAMA_BATCHES:-$batches}
llama_tokens=${LLAMA_DECODE_TOKENS:-4}

bench_require fio jq -- "$bench" "$gen" "$cli"
[[ $(id -u) == 0 ]] || echo "WARNING: not root: no page-cache drops and no memory cgroup for llama.cpp" >&2

# Kimi K2's attention and experts (config.json of moonshotai/Kimi-K2-Instruct)
# with K3's parts; K3's exact widths are not public (docs/models.md, "kimi-k3
# at full size"): the latent width is the one assumed there. Q8_0 outside the
# experts (the generator quantizes Q4_K far slower; a few layers' resident
# weights fit the budget either way) and random MXFP4 codes for the experts
# (--random-expert-codes: quantizing 20 GiB of normal rows takes the
# generator ~10 CPU-minutes; codes are zero-mean all the same).
shape=${SHAPE:---n-embd 7168 --n-head 64 --n-ff 18432 --n-expert 384 --n-expert-used 8 --kda-head-dim 128
  --kl-kv-lora-rank 512 --kl-qk-rope-dim 64 --kl-qk-nope-dim 128 --kl-v-head-dim 128 --kl-n-ff-expert 2048
  --expert-latent 4096}
# shellcheck disable=SC2086  # $shape is a list of flags
model=$(bench_generate "$work" "k3-L$n_layer" --arch kimi-k3 --n-layer "$n_layer" $shape --mla-every 4 \
  --kl-n-shared-expert 1 --kl-n-dense-lead 1 --attn-res-block 2 --type Q8_0 --tensor-type _exps=MXFP4 \
  --random-expert-codes --seed 1)
[[ ${KEEP_MODEL:-1} == 1 ]] || trap 'rm -f "$model"' EXIT
budget_bytes=$(numfmt --from=iec "${budget%iB}")
model_bytes=$(stat -c %s "$model")
largest=$(tr , '\n' <<<"$batches,$llama_batches" | sort -n | tail -1)
echo "== $(date -u '+%F %H:%M UTC'): model $model: $((model_bytes >> 20)) MiB =" \
     "$(jq -n "$model_bytes / $budget_bytes | .*10|round/10")x the budget of $budget"
echo "   machine: $(machine_line)"

fio_gib_s=$(jq -n "$(bench_fio "$model" 6) * 1000 | round / 1000")
echo "== fio O_DIRECT sequential read (best of three shapes): $fio_gib_s GiB/s"

echo "== nightshift model info at $budget for $largest sequences, disk at fio's rate"
"$cli" model info "$model" --memory-budget "$budget" --context $((prompt_tokens + decode_tokens + 32)) \
  --max-batch "$largest" --disk-rate "${fio_gib_s}GiB" 2>/dev/null |
  grep -E 'parameters|resident|KV cache|recurrent|expert cache|disk-bound|sequence' | sed 's/^/   /'

echo "== routing spread over 64 random tokens (a trained model's: most experts of each layer touched, none dominant)"
"$bench" spread "$model" --budget "$budget" --tokens 64 2>/dev/null | grep -v '^  layer' | sed 's/^/   /'

echo "== nightshift decode, batches $batches, streaming under $budget..." >&2
drop_caches
ns_out=$("$bench" decode "$model" --batch "$batches" --tokens "$decode_tokens" --prompt-tokens "$prompt_tokens" \
           --max-sequences "$largest" --budget "$budget" --disk-gib-s "$fio_gib_s" --verify "$verify" 2>/dev/null)
grep -E '^(plan|decode)' <<<"$ns_out" | sed 's/^/   /'

llama_out=""
if [[ -n $llama_bin ]]; then
  echo "== llama.cpp llama-batched-bench, batches $llama_batches, $llama_tokens tokens each, memory cgroup of $budget" \
       "(mmap, -nr, -kvu)..." >&2
  drop_caches
  llama_out=$(llama_batched "$budget_bytes" "$llama_bin" -m "$model" -c $((largest * (prompt_tokens + llama_tokens) + 64)) \
                -b 2048 -ub 512 -npp "$prompt_tokens" -ntg "$llama_tokens" -npl "$llama_batches" -nr -kvu \
                -t "$(nproc)") || echo "WARNING: llama-batched-bench failed (its figures are missing below)" >&2
  sed 's/^/   /' <<<"$llama_out"
fi

echo
echo "== results: decode tok/s aggregate over all sequences (budget $budget, model $((model_bytes >> 20)) MiB," \
     "fio $fio_gib_s GiB/s, load $(cut -d' ' -f1-3 /proc/loadavg))"
printf "%6s %9s %7s %10s %10s %9s %10s %9s %8s %11s %8s\n" batch "tok/s" "vs 1" "MiB/step" "disk ceil" "of disk" \
  "RAM ceil" "of RAM" "io wait" "llama.cpp" "ns/llama"
one=""
for n in ${batches//,/ }; do
  s=$(grep "^RESULT.* batch=$n " <<<"$ns_out")
  tok=$(kv tok_s <<<"$s"); disk=$(kv disk_ceiling_tok_s <<<"$s"); io=$(kv io_share <<<"$s")
  [[ -n $one ]] || one=$tok
  ram=$(jq -n "if $io < 1 then $tok / (1 - $io) else 0 end")
  l=$(jq -r --argjson n "$n" 'select(.pl == $n) | .speed_tg' <<<"$llama_out" 2>/dev/null | head -1)
  printf "%6s %9.3f %6.2fx %10.0f %10.3f %8.0f%% %10.3f %8.0f%% %7.0f%% %11s %8s\n" "$n" "$tok" "$(jq -n "$tok / $one")" \
    "$(jq -n "$(kv bytes_per_step <<<"$s") / 1048576")" "$disk" "$(jq -n "if $disk > 0 then $tok / $disk * 100 else 0 end")" \
    "$ram" "$(jq -n "if $ram > 0 then $tok / $ram * 100 else 0 end")" "$(jq -n "$io * 100")" "${l:--}" \
    "$([[ -n $l ]] && jq -n -r "if $l > 0 then $tok / $l * 100 | round / 100 else 0 end | tostring + \"x\"" || echo -)"
done
peak=$(grep '^RESULT' <<<"$ns_out" | kv peak_rss_mib | sort -n | tail -1)
verdict() { jq -n -r "if $1 then \"PASS\" else \"FAIL\" end"; }
echo "peak RSS $peak MiB of the $((budget_bytes >> 20)) MiB budget: $(verdict "$peak <= $((budget_bytes >> 20))")"
[[ $verify == 0 ]] || echo "batched greedy outputs == alone: $(verdict "$(grep -c 'verify=FAIL' <<<"$ns_out" || true) == 0")"
[[ -z $llama_out ]] || echo "llama.cpp: $llama_tokens tokens per sequence (nightshift $decode_tokens); its prefill of" \
  "$prompt_tokens tokens per sequence: $(jq -r '"batch \(.pl) \(.speed_pp | .*100|round/100) tok/s"' <<<"$llama_out" | paste -sd, -)"
