# `model info` on the real Qwen3-Next-80B-A3B and Qwen3.5-35B-A3B shapes without
# their weights (header-only files over sparse, all-zero data sections): the
# 8 GiB memory plan shows the Gated DeltaNet state as its own line and the KV
# cache of the full-attention layers only (one layer in four).
source "$(dirname "$0")/lib.sh"

# Qwen3-Next-80B-A3B (its config.json): 48 layers, full attention every 4th, 16 heads of 256 over 2 KV heads
# (a quarter rotated), Gated DeltaNet with 16 key / 32 value heads of 128, 512 experts top-10 of 512 plus a
# shared expert of 512.
make_header_only_model next80b.gguf --arch qwen3next --n-embd 2048 --n-layer 48 --n-head 16 --n-head-kv 2 --n-ff 512 \
  --n-expert 512 --n-expert-used 10 --full-attn-every 4 --qn-head-dim 256 --qn-rope-dim 64 --gdn-head-dim 128 \
  --gdn-k-heads 16 --gdn-v-heads 32 --gdn-conv-kernel 4 --qn-n-ff-shexp 512 --n-ctx 262144 --type Q8_0 \
  --tensor-type _exps=Q4_K
out=$(ns model info "$WORK/next80b.gguf" --memory-budget 8GiB --context 8192 --disk-rate 2.3GiB)
expect_contains "$out" "parameters: 79054158592" "80B parameters"
# One sequence's state (75.38 MiB) and the daemon's 2 prefix-cache snapshots' (prefix_cache, docs/batching.md).
expect_contains "$out" "recurrent state      226.12 MiB  (delta-rule layers, fixed per sequence)" "recurrent state line"
expect_contains "$out" "KV cache             192.00 MiB" "KV cache of the 12 full-attention layers only"

# Qwen3.5-35B-A3B: 40 layers, the same attention and delta-net heads, 256 experts top-8 of 512, imrope sections.
make_header_only_model q35b.gguf --arch qwen35moe --n-embd 2048 --n-layer 40 --n-head 16 --n-head-kv 2 --n-ff 512 \
  --n-expert 256 --n-expert-used 8 --full-attn-every 4 --qn-head-dim 256 --qn-rope-dim 64 --gdn-head-dim 128 \
  --gdn-k-heads 16 --gdn-v-heads 32 --gdn-conv-kernel 4 --qn-n-ff-shexp 512 --qn-rope-sections 11,11,10,0 \
  --n-ctx 262144 --type Q8_0 --tensor-type _exps=Q4_K
out=$(ns model info "$WORK/q35b.gguf" --memory-budget 8GiB --context 8192 --disk-rate 2.3GiB)
expect_contains "$out" "parameters: 33645589120" "35B parameters"
expect_contains "$out" "recurrent state      188.44 MiB  (delta-rule layers, fixed per sequence)" "recurrent state line (3 x 62.81)"
expect_contains "$out" "KV cache             160.00 MiB" "KV cache of the 10 full-attention layers only"
echo "ok"
