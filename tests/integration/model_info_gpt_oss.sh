# `model info` on gpt-oss-120b's shape without its weights (a header over a
# sparse, all-zero data section: 58 GiB that take no disk space; the built-in
# 512-token vocabulary instead of the real 201088, so 1.2B fewer parameters):
# the plan's KV cache line says which layers slide and what they keep, and only
# the 18 full-attention layers grow with the context.
source "$(dirname "$0")/lib.sh"

make_header_only_model oss120b.gguf --arch gpt-oss --n-embd 2880 --n-layer 36 --n-head 64 --n-head-kv 8 --oss-head-dim 64 \
  --n-ff 2880 --n-expert 128 --n-expert-used 4 --oss-sliding-window 128 --rope-base 150000 --n-ctx 131072 \
  --type Q8_0 --tensor-type _exps=MXFP4 --vocab-pre gpt-4o

out=$(ns model info "$WORK/oss120b.gguf" --memory-budget 8GiB --context 8192 --disk-rate 2.3GiB)
expect_contains "$out" "parameters: 115673838912" "116B parameters"
expect_contains "$out" "architecture: \"gpt-oss\"" "architecture"
expect_contains "$out" "pre_tokenizer: \"gpt-4o\"" "pre-tokenizer"
# 18 full layers x 8 KV heads x 64 x (K + V) x F16 per token of context.
expect_contains "$out" "kv_bytes_per_token: 36864" "KV bytes per token: the full layers only"
# 8192 x 36 KiB for the full layers + 18 rings of 1152 rows (window 127 + the prefill chunk of 1024 tokens
# that an 8 GiB budget gives, as the daemon's engine sizes it, rounded to 8) x 2 KiB, for the sequence and
# the daemon's 2 prefix-cache snapshots (prefix_cache, docs/batching.md).
expect_contains "$out" "KV cache             409.50 MiB  (18 of 36 layers sliding-window: 41472 KiB a sequence whatever the context; 2 prefix-cache snapshots (rows from the pool))" \
  "KV cache line with the sliding layers"
expect_contains "$out" "of 4608 experts at 12.62 MiB a slot" "36 x 128 MXFP4 experts"

json=$(ns model info "$WORK/oss120b.gguf" --memory-budget 8GiB --context 8192 --json)
expect_eq "$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["kv_bytes_per_token"], d["memory_plan"]["kv_cache_bytes"], d["n_layer"])' <<<"$json")" \
  "36864 429391872 36" "JSON fields"
echo "ok"
