#!/usr/bin/env bash
# Regenerates the goldens in tests/conformance/goldens/ from the reference
# implementation (llama.cpp of 2026-09-28, see build_reference.sh): for each
# model below, nightshift-make-model writes the GGUF (deterministic per its
# arguments and seed), ns-ref-dump runs the reference on prompts.txt, and the
# JSON records the generator arguments, so the conformance test can make the
# same file again and compare (tests/conformance/logits_test.cpp).
#
#   tests/conformance/reference/make_goldens.sh [BUILD_DIR] [REF_WORKDIR] [NAME...]
#
# BUILD_DIR: nightshift's build (default ./build); REF_WORKDIR as for
# build_reference.sh (default /var/tmp/ns-reference). NAMEs: only those models.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
refwork="${2:-/var/tmp/ns-reference}"
shift 2 2>/dev/null || shift $#
only=("$@")
gen="$build/tools/nightshift-make-model"
[ -x "$gen" ] || { echo "no $gen: build nightshift first (scripts/build.sh)" >&2; exit 1; }
# NS_REF_DUMP=PATH: an ns-ref-dump already built (e.g. from this checkout's ns_ref_dump.cpp into a private
# directory, leaving the shared build alone); the reference is then not rebuilt.
if [ -n "${NS_REF_DUMP:-}" ]; then
  refbin="$refwork/build"
  dump="$NS_REF_DUMP"
else
  refbin="$("$here/build_reference.sh" "$refwork" | tail -1)"
  dump="$refbin/ns-ref-dump"
fi
commit="$(git -C "$refwork/llama.cpp" log -1 --format='%H %cd' --date=short)"
tmp="$(mktemp -d)"
mkdir -p "$root/tests/conformance/goldens"
trap 'rm -rf "$tmp"' EXIT

# name # tolerance # outliers # generator arguments. Tolerance: |dlogit| allowed per logit. Outliers: the
# fraction of logits that may exceed it (0: none). Quantized MoE models get a budget because near-tie expert
# choices flip under any rounding change, the reference's own two prefill modes included: each golden records
# that self-check (the reference with the prompt in one batch vs token by token), and its F32 twin is strict.
kl_shape="--arch kimi-linear --n-embd 256 --n-layer 6 --n-head 4 --n-ff 512 --n-expert 16 --n-expert-used 4 \
 --mla-every 3 --kda-head-dim 32 --conv-kernel 4 --kl-n-ff-expert 256 --n-ctx 4096 --seed 7"
k3_shape="--arch kimi-k3 --n-embd 256 --n-layer 6 --n-head 4 --n-ff 512 --n-expert 16 --n-expert-used 4 \
 --mla-every 3 --kda-head-dim 32 --conv-kernel 4 --kl-n-ff-expert 256 --n-ctx 4096 --seed 7"
qn_shape="--n-embd 256 --n-layer 6 --n-head 4 --n-head-kv 2 --n-ff 256 --n-expert 16 --n-expert-used 4 \
 --full-attn-every 3 --qn-head-dim 64 --qn-rope-dim 16 --gdn-head-dim 32 --gdn-k-heads 2 --gdn-v-heads 4 \
 --gdn-conv-kernel 4 --qn-n-ff-shexp 256 --n-ctx 4096 --seed 7"
qn_kquant="--type Q8_0 --tensor-type ffn_(gate|up)_exps=Q4_K --tensor-type ffn_down_exps=Q6_K"
glm_shape="--arch glm4moe --n-embd 256 --n-layer 4 --n-head 4 --n-head-kv 2 --glm-head-dim 64 --n-ff 512 --n-expert 16 \
 --n-expert-used 4 --glm-n-ff-expert 128 --glm-nextn-layers 1 --rope-base 1000000 --n-ctx 4096 --seed 7"
# gpt-oss: a 12-token sliding window on even layers, so prompts.txt's longer prompts cross it. Seed 11: with
# seed 7 two F32 routing decisions were ties to 4e-6 (layer 3, a CJK prompt position and a greedy step), which
# the F32 summation order decides, and the strict F32 twin cannot carry an outlier budget.
oss_shape="--arch gpt-oss --n-embd 128 --n-layer 4 --n-head 8 --n-head-kv 2 --oss-head-dim 32 --n-ff 128 \
 --n-expert 16 --n-expert-used 4 --oss-sliding-window 12 --rope-base 150000 --n-ctx 4096 --seed 11"
models=(
  "tiny-kimi-linear-f32#0.002#0#$kl_shape --type F32"
  "tiny-kimi-linear-q8_0#0.05#0.03#$kl_shape --type Q8_0"
  "tiny-kimi-linear-mxfp4#0.15#0.03#$kl_shape --type Q8_0 --tensor-type _exps=MXFP4 --vocab-pre kimi-k2"
  "tiny-kimi-linear-kquant#0.15#0.03#$kl_shape --type Q8_0 --tensor-type ffn_(gate|up)_exps=Q4_K --tensor-type ffn_down_exps=Q6_K --tensor-type attn_q.weight=Q5_K --tensor-type attn_k.weight=Q5_K --tensor-type attn_v.weight=Q5_K"
  "tiny-kimi-k3-f32#0.002#0#$k3_shape --attn-res-block 2 --expert-latent 128 --type F32"
  "tiny-kimi-k3-plain-f32#0.002#0#$k3_shape --attn-res-block 0 --expert-latent 0 --attn-gate false --kda-lower-bound 0 --type F32"
  "tiny-kimi-k3-mxfp4#0.15#0.03#$k3_shape --attn-res-block 2 --expert-latent 128 --type Q8_0 --tensor-type _exps=MXFP4"
  "tiny-gpt-oss-f32#0.002#0#$oss_shape --type F32 --vocab-pre gpt-4o"
  "tiny-gpt-oss-mxfp4#0.15#0.03#$oss_shape --type Q8_0 --tensor-type _exps=MXFP4 --vocab-pre gpt-4o"
  "tiny-kimi-k3-kquant#0.15#0.03#$k3_shape --attn-res-block 2 --type Q8_0 --tensor-type ffn_(gate|up)_exps=Q4_K --tensor-type ffn_down_exps=Q6_K --tensor-type attn_q.weight=Q5_K --tensor-type attn_k.weight=Q5_K --tensor-type attn_v.weight=Q5_K"
  "tiny-qwen3next-f32#0.002#0#--arch qwen3next $qn_shape --type F32"
  "tiny-qwen3next-q8_0#0.05#0.03#--arch qwen3next $qn_shape --type Q8_0"
  "tiny-qwen3next-kquant#0.15#0.03#--arch qwen3next $qn_shape $qn_kquant"
  "tiny-qwen3next-mtp-f32#0.002#0#--arch qwen3next $qn_shape --qn-nextn-layers 1 --qn-layer-types true --type F32"
  "tiny-qwen35moe-f32#0.002#0#--arch qwen35moe $qn_shape --type F32"
  "tiny-qwen35moe-mtp-f32#0.002#0#--arch qwen35moe $qn_shape --qn-nextn-layers 1 --qn-layer-types true --type F32"
  "tiny-qwen35moe-q8_0#0.05#0.03#--arch qwen35moe $qn_shape --type Q8_0"
  "tiny-qwen35moe-kquant#0.15#0.03#--arch qwen35moe $qn_shape $qn_kquant"
)
# minimax-m2: full-width Q/K norms (one over all heads of a token), 32 of 64 head dims rotated, every layer
# sigmoid-routed with the selection bias; the K-quant mix with the model's own pre-tokenizer name (GPT-4o's regex).
mm_shape="--arch minimax-m2 --n-embd 256 --n-layer 4 --n-head 4 --n-head-kv 2 --mm-head-dim 64 --n-ff 256 \
 --n-expert 16 --n-expert-used 4 --rope-base 5000000 --n-ctx 4096 --seed 7"
models+=(
  "tiny-minimax-m2-f32#0.002#0#$mm_shape --type F32"
  "tiny-minimax-m2-kquant#0.15#0.03#$mm_shape --type Q8_0 --tensor-type ffn_(gate|up)_exps=Q4_K --tensor-type ffn_down_exps=Q6_K --tensor-type attn_(q|k|v).weight=Q5_K --vocab-pre minimax-m2"
)
# minimax-m3: per-head Q/K norms, 32 of 64 head dims rotated, a dense lead layer, 16 experts top-4 with a shared one,
# swigluoai everywhere; MiniMax sparse attention in the MoE layers (one indexer head of 64 per KV head, blocks of 4).
# The reference selects only with flash attention on (off, it attends densely): the goldens that select (top-4
# blocks with the local one forced, so past 16 positions) are fa_models below; the -dense twin (top-256 blocks: past
# every prompt, the indexer never selects) is made as the others, with flash attention off. The selecting F32 twin
# agrees within 0.002 everywhere (max 8.3e-4), though the reference against itself there (flash attention on, whole
# prompt vs token by token) differs by up to 0.558 at one position where an expert choice is a near-tie.
mm3_shape="--arch minimax-m3 --n-embd 256 --n-layer 4 --n-head 4 --n-head-kv 2 --mm3-head-dim 64 --n-ff 256 \
 --n-expert 16 --n-expert-used 4 --msa-head-dim 64 --msa-block-size 4 --msa-local-blocks 1 --rope-base 5000000 \
 --n-ctx 4096 --seed 7"
mm3_kquant="--type Q8_0 --tensor-type ffn_(gate|up)_exps=Q4_K --tensor-type ffn_down_exps=Q6_K --vocab-pre minimax-m2"
models+=(
  "tiny-minimax-m3-dense-f32#0.002#0#$mm3_shape --msa-top-k 256 --type F32"
  "tiny-minimax-m3-f32#0.002#0#$mm3_shape --msa-top-k 4 --type F32"
)
# The K-quant twin carries a 5% outlier budget: the reference is as noisy here as against it (its own modes,
# whole vs token by token, differ by up to 0.564 and pick other greedy continuations); against the file's F32
# ideal (ideal_spread.sh) nightshift is as far as the reference (mean 0.0248 vs its 0.0271..0.0291), docs/models.md.
models+=(
  "tiny-minimax-m3-kquant#0.15#0.05#$mm3_shape --msa-top-k 4 $mm3_kquant"
)
# The entries the reference runs with flash attention on (ns-ref-dump's NS_REF_FLASH_ATTN).
fa_models=" tiny-minimax-m3-f32 tiny-minimax-m3-kquant "
# bailingmoe2 (Ling / Ring 2.0): fused QKV with per-head Q/K norms, half of each 64-wide head rotated, a dense
# lead layer, 16 experts in 4 groups of which 2 are used (top-4), a shared expert, a NextN block; the K-quant mix
# with the model's own pre-tokenizer name.
ling_shape="--arch bailingmoe2 --n-embd 256 --n-layer 4 --n-head 4 --n-head-kv 2 --n-ff 512 --n-expert 16 \
 --n-expert-used 4 --ling-n-ff-expert 256 --ling-n-expert-group 4 --ling-n-expert-group-used 2 --rope-base 600000 \
 --n-ctx 4096 --seed 7"
models+=(
  "tiny-bailingmoe2-f32#0.002#0#$ling_shape --type F32"
  "tiny-bailingmoe2-kquant#0.15#0.03#$ling_shape --type Q8_0 --tensor-type ffn_(gate|up)_exps=Q4_K --tensor-type ffn_down_exps=Q6_K --tensor-type attn_qkv.weight=Q5_K --vocab-pre bailingmoe2"
)
# bailingmoe3 (Ling / Ring 3.0): KDA layers 0, 1, 3, 4 (lower-bound decay gate, full-rank f and g), MLA layers 2
# and 5 (rotated rope part, per-head attn_gate), a dense lead layer, 16 experts top-4 with a shared-expert FFN, a
# NextN block; the SwiGLU clamped at 1.5 in every FFN (a few % of the values clamp). The second F32 twin has the
# low-rank query (Ling-3.0-tiny's form) and no clamp; the K-quant mix with the Ling pre-tokenizer name.
ling3_shape="--arch bailingmoe3 --n-embd 256 --n-layer 6 --n-head 4 --n-ff 512 --n-expert 16 --n-expert-used 4 \
 --ling3-group 3 --ling3-kda-head-dim 32 --ling3-n-ff-expert 256 --ling3-n-ff-shexp 256 --rope-base 600000 \
 --n-ctx 4096 --seed 7"
models+=(
  "tiny-bailingmoe3-f32#0.002#0#$ling3_shape --ling3-swiglu-limit 1.5 --type F32"
  "tiny-bailingmoe3-qlora-f32#0.002#0#$ling3_shape --ling3-q-lora-rank 64 --type F32"
  "tiny-bailingmoe3-kquant#0.15#0.03#$ling3_shape --ling3-swiglu-limit 1.5 --type Q8_0 --tensor-type ffn_(gate|up)_exps=Q4_K --tensor-type ffn_down_exps=Q6_K --tensor-type attn_(q|k|v).weight=Q5_K --vocab-pre bailingmoe2"
)
# DeepSeek sparse attention: deepseek32 (V3.2) and glm-dsa (GLM-5.x), MLA plus the lightning indexer (8 heads of 64,
# top-16 positions), so prompts.txt's longer prompts and the greedy steps past 16 tokens attend sparsely; glm-dsa
# with per-layer indexer types (layers 1 and 3 reuse the selection of 0 and 2). The K-quant mix with each model's
# own pre-tokenizer name. deepseek32 seed 11: with seed 7 the long prompt's position 159 had layer 3's 16th and 17th
# indexer scores 2.4e-4 apart (0.184751 vs 0.184706), which the F32 summation order decides. Its K-quant mix: 0.2, as
# the ds2-k2 mixes (the reference against itself: max 0.40; a greedy step's margin of 0.154 flips; both engines are
# as far from the file's F32 ideal, docs/models.md).
dsa_shape="--n-embd 256 --n-layer 4 --n-head 4 --n-ff 512 --n-expert 16 --n-expert-used 4 --q-lora-rank 128 \
 --kv-lora-rank 64 --qk-rope-dim 16 --qk-nope-dim 32 --v-head-dim 32 --n-ff-expert 256 --n-shared-expert 1 \
 --n-dense-lead 1 --dsa-heads 8 --dsa-head-dim 64 --dsa-top-k 16 --n-ctx 4096"
dsa_kquant="--type Q8_0 --tensor-type ffn_(gate|up)_exps=Q4_K --tensor-type ffn_down_exps=Q6_K"
models+=(
  "tiny-deepseek32-f32#0.002#0#--arch deepseek32 $dsa_shape --seed 11 --type F32"
  "tiny-deepseek32-kquant#0.2#0.03#--arch deepseek32 $dsa_shape --seed 11 $dsa_kquant --vocab-pre deepseek-v3"
  "tiny-glm-dsa-f32#0.002#0#--arch glm-dsa $dsa_shape --seed 7 --dsa-types 1,0,1,0 --type F32"
  "tiny-glm-dsa-kquant#0.15#0.03#--arch glm-dsa $dsa_shape --seed 7 --dsa-types 1,0,1,0 $dsa_kquant --vocab-pre glm4"
)
# deepseek4 (DeepSeek V4): four hyper-connection streams; blocks compressing by 0, 4 (the indexer keeping 8 of the
# blocks of 4) and 128; a 16-token raw window; the first two layers hash-routed; SwiGLU clamped at 1.5. The longest
# prompt of prompts.txt (417 bytes) crosses the window, the indexer's top-k and the first blocks of 128. The quantized
# twin as V4's own files are: MXFP4 experts, Q8_0 elsewhere.
dsv4_shape="--arch deepseek4 --n-embd 256 --n-layer 4 --n-head 4 --n-ff 128 --n-expert 16 --n-expert-used 4 \
 --dsv4-ratios 0,4,128,4 --n-ctx 4096 --seed 7"
models+=(
  "tiny-deepseek4-f32#0.002#0#$dsv4_shape --type F32"
  "tiny-deepseek4-mxfp4#0.15#0.03#$dsv4_shape --type Q8_0 --tensor-type _exps=MXFP4"
)
models+=(
  "tiny-glm4moe-f32#0.002#0#$glm_shape --type F32"
  "tiny-glm4moe-air-f32#0.002#0#$glm_shape --glm-qk-norm false --glm-n-dense-lead 0 --type F32"
  "tiny-glm4moe-kquant#0.15#0.03#$glm_shape --type Q8_0 --tensor-type ffn_(gate|up)_exps=Q4_K --tensor-type attn_(q|k|v).weight=Q5_K --vocab-pre glm4"
)
# The ggml 2026 low-bit types (issue 16): experts in Q1_0 (gate), Q2_0 (up) and NVFP4 (down), the rest Q8_0;
# tiny-kimi-linear-f32 is the F32 twin.
models+=(
  "tiny-kimi-linear-lowtypes#0.15#0.03#$kl_shape --type Q8_0 --tensor-type ffn_gate_exps=Q1_0 --tensor-type ffn_up_exps=Q2_0 --tensor-type ffn_down_exps=NVFP4"
)
# Low-bit mixes as the 1.5-2.5-bit GGUFs of K2 / DeepSeek are laid out: routed experts IQ1_S / IQ1_M /
# IQ2_XXS or ternary TQ1_0 / TQ2_0, attention Q4_K / Q6_K, shared experts and the rest Q8_0. An entry with
# --imatrix is quantized by llama-quantize with that importance matrix (llama-imatrix on prompts.txt, committed
# under tests/conformance/imatrix/) and must match the generator byte for byte: reference_quantize.sh (the
# ternary types ignore the matrix, in llama-quantize as here: tiny-ds2-k2-tq keeps it for the shared arguments
# and that byte check). Tolerance 0.2 (0.25 for IQ1_S): the reference against itself differs by up to 0.68 on
# these files (0.40 on tiny-ds2-k2-tq; near-tie routing over 1.6-2-bit experts), and on tiny-ds2-k2-iq1s a
# greedy step with a top-2 margin of 0.2007 flips with the routing.
# The kimi-linear mix is not that coarse (the reference against itself: max 0.011; we agree to 0.016): 0.05.
ds2_k2_shape="--arch deepseek2 --n-embd 256 --n-layer 4 --n-head 8 --n-ff 512 --n-expert 8 --n-expert-used 2 \
 --q-lora-rank 256 --kv-lora-rank 64 --qk-rope-dim 16 --qk-nope-dim 32 --v-head-dim 32 --n-ff-expert 256 \
 --n-shared-expert 1 --n-dense-lead 1 --n-ctx 4096 --seed 7"
ds2_k2_attn="--tensor-type attn_(q_a|q_b|kv_a_mqa).weight=Q4_K --tensor-type attn_output=Q6_K \
 --imatrix tests/conformance/imatrix/tiny-ds2-k2.imatrix.gguf --imatrix-include _exps"
kl_lowbit_shape="--arch kimi-linear --n-embd 256 --n-layer 3 --n-head 4 --n-ff 512 --n-expert 8 --n-expert-used 2 \
 --mla-every 3 --kda-head-dim 32 --conv-kernel 4 --kl-n-ff-expert 256 --n-ctx 4096 --seed 7"
kl_lowbit_attn="--tensor-type attn_(q|k|v).weight=Q4_K \
 --imatrix tests/conformance/imatrix/tiny-kimi-linear-lowbit.imatrix.gguf --imatrix-include _exps"
models+=(
  "tiny-ds2-k2-f32#0.002#0#$ds2_k2_shape --type F32"
  "tiny-ds2-k2-iq1s#0.25#0.03#$ds2_k2_shape --type Q8_0 --tensor-type ffn_(gate|up)_exps=IQ1_S --tensor-type ffn_down_exps=IQ2_XXS $ds2_k2_attn"
  "tiny-ds2-k2-iq2xxs#0.2#0.03#$ds2_k2_shape --type Q8_0 --tensor-type _exps=IQ2_XXS $ds2_k2_attn"
  "tiny-ds2-k2-tq#0.2#0.03#$ds2_k2_shape --type Q8_0 --tensor-type ffn_(gate|up)_exps=TQ1_0 --tensor-type ffn_down_exps=TQ2_0 $ds2_k2_attn"
  "tiny-kimi-linear-lowbit-f32#0.002#0#$kl_lowbit_shape --type F32"
  "tiny-kimi-linear-iq1m#0.05#0.03#$kl_lowbit_shape --type Q8_0 --tensor-type ffn_(gate|up)_exps=IQ1_M --tensor-type ffn_down_exps=IQ2_XXS $kl_lowbit_attn"
)
[ -n "${NS_GOLDEN_EXTRA:-}" ] && models+=("${NS_GOLDEN_EXTRA}")   # one more "name#tolerance#outliers#arguments"
# Trained weights (shared/models/trained, the demo's copy in examples/models): the file itself, "file:" and its
# path from the repository's root, instead of generator arguments.
models+=(
  "kjv-moe-q8_0#0.05#0#file:../shared/models/trained/kjv-moe-q8_0.gguf"
  "kjv-moe-q4_0#0.1#0#file:examples/models/kjv-moe-q4_0.gguf"
)

# Long contexts (docs/long-context.md), in goldens/long/: name # tolerance # prompt tokens # last positions kept #
# generator arguments. A synthetic prompt of that many token ids (ns-ref-dump --synthetic, seed 1), the logits
# of its last positions and 4 greedy steps: the JSON stays small however long the prompt. YaRN models run
# past their original context (rope.scaling.original_context_length).
oss_long="--arch gpt-oss --n-embd 64 --n-layer 2 --n-head 2 --n-head-kv 1 --oss-head-dim 16 --n-ff 64 \
 --n-expert 4 --n-expert-used 2 --oss-sliding-window 128 --rope-base 150000 --oss-yarn-factor 32 \
 --oss-yarn-orig-ctx 4096 --n-ctx 131072 --type F32 --seed 5"
# deepseek4 past two blocks of 128 (the F32 golden's shape): 320 synthetic tokens, the last 32 kept.
dsv4_long="--arch deepseek4 --n-embd 256 --n-layer 4 --n-head 4 --n-ff 128 --n-expert 16 --n-expert-used 4 \
 --dsv4-ratios 0,4,128,4 --n-ctx 4096 --type F32 --seed 7"
long_models=(
  "long-gpt-oss-yarn-32k#0.002#32768#4#$oss_long"
  "long-deepseek4-320#0.002#320#32#$dsv4_long"
)

for entry in "${long_models[@]}"; do
  IFS="#" read -r name tol n_tokens last args <<<"$entry"
  if [ ${#only[@]} -eq 0 ] || [[ ! " ${only[*]} " =~ " $name " ]]; then continue; fi  # by name only: minutes each
  echo "== $name" >&2
  # shellcheck disable=SC2086
  "$gen" $args --out "$tmp/$name.gguf" >/dev/null
  "$dump" "$tmp/$name.gguf" --synthetic "$n_tokens" 1 "$last" 8 4 > "$tmp/$name.long.json" 2> "$tmp/$name.log" ||
    { tail -20 "$tmp/$name.log" >&2; exit 1; }
  mkdir -p "$root/tests/conformance/goldens/long"
  python3 - "$name" "$tol" "$commit" "$args" "$tmp/$name.long.json" "$root/tests/conformance/goldens/long/$name.json" <<'PY'
import json, shlex, sys
name, tol, commit, args, dump_path, out = sys.argv[1:]
doc = {"model": name, "reference": "llama.cpp " + commit + " (node-llama-cpp 3.22.1), CPU, flash attention off",
       "generator": shlex.split(args), "tolerance": float(tol), "prompt": "synthetic (ns-ref-dump --synthetic)"}
doc.update(json.load(open(dump_path)))
with open(out, "w") as f:
    json.dump(doc, f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {out}: {doc['n_tokens']} prompt tokens", file=sys.stderr)
PY
done

for entry in "${models[@]}"; do
  IFS="#" read -r name tol outliers args <<<"$entry"
  if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " =~ " $name " ]]; then continue; fi
  echo "== $name" >&2
  # shellcheck disable=SC2086
  if [[ "$args" == file:* ]]; then
    cp "$root/${args#file:}" "$tmp/$name.gguf"
  elif [[ " $args " == *" --imatrix "* ]]; then
    (cd "$root" && "$here/reference_quantize.sh" "$gen" "$refbin/bin" "$tmp/$name.gguf" $args)
  else
    "$gen" $args --out "$tmp/$name.gguf" >/dev/null
  fi
  fa=0
  [[ "$fa_models" == *" $name "* ]] && fa=1
  NS_REF_FLASH_ATTN=$fa "$dump" "$tmp/$name.gguf" "$here/prompts.txt" 8 16 > "$tmp/$name.cases.json" \
    2> "$tmp/$name.log" || { tail -20 "$tmp/$name.log" >&2; exit 1; }
  NS_REF_FLASH_ATTN=$fa NS_REF_UBATCH=1 "$dump" "$tmp/$name.gguf" "$here/prompts.txt" 8 16 > "$tmp/$name.ub1.json" \
    2> "$tmp/$name.log" || { tail -20 "$tmp/$name.log" >&2; exit 1; }
  python3 - "$name" "$tol" "$outliers" "$commit" "$args" "$tmp/$name.cases.json" "$tmp/$name.ub1.json" \
    "$root/tests/conformance/goldens/$name.json" "$fa" <<'PY'
import json, shlex, sys
name, tol, outliers, commit, args, cases_path, ub1_path, out, fa = sys.argv[1:]
cases = json.load(open(cases_path))
# The reference against itself: the same prompts fed token by token.
mx = total = 0.0
n = over = 0
for a, b in zip(cases, json.load(open(ub1_path))):
    for ra, rb in zip(a["prompt_top_logits"], b["prompt_top_logits"]):
        ref = dict((i, l) for i, l in ra)
        for i, l in rb:
            if i in ref:
                d = abs(ref[i] - l)
                mx, total, n, over = max(mx, d), total + d, n + 1, over + (d > float(tol))
fa_state = "on" if fa == "1" else "off"
doc = {"model": name, "reference": "llama.cpp " + commit + " (node-llama-cpp 3.22.1), CPU, flash attention " + fa_state,
       **({"file": args[len("file:"):]} if args.startswith("file:") else {"generator": shlex.split(args)}),
       "tolerance": float(tol), "outliers": float(outliers),
       "reference_self_check": {"what": "the reference, whole prompt vs token by token, prompt logits",
                                "max_abs_diff": round(mx, 6), "mean_abs_diff": round(total / max(n, 1), 7),
                                "over_tolerance": over, "compared": n},
       "cases": cases}
with open(out, "w") as f:
    json.dump(doc, f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {out}: {len(cases)} prompts", file=sys.stderr)
PY
done
