# `model info` on GLM-4.5's shape (355B-A32B: 92 layers, 3 dense, 160 experts top-8 of 1536, one shared
# expert, 96 heads of 128 over 8 KV heads, one NextN block) without its weights: the NextN block's 23 tensors
# (3.99B parameters, a 160-expert MoE layer) are neither counted nor planned, and the 24 GiB plan streams the
# 89 MoE layers' experts.
source "$(dirname "$0")/lib.sh"

make_header_only_model glm45.gguf --arch glm4moe --n-embd 5120 --n-layer 92 --n-head 96 --n-head-kv 8 --glm-head-dim 128 \
  --n-ff 12288 --n-expert 160 --n-expert-used 8 --glm-n-ff-expert 1536 --glm-n-shared 1 --glm-n-dense-lead 3 \
  --glm-nextn-layers 1 --rope-base 1000000 --n-ctx 131072 --type Q8_0 --tensor-type _exps=Q4_K

out=$(ns model info "$WORK/glm45.gguf" --memory-budget 24GiB --context 2048 --disk-rate 2.3GiB)
expect_contains "$out" "parameters: 351251179424" "355B less the NextN block"
expect_contains "$out" "tensors_not_loaded: 23" "the NextN block is skipped"
expect_contains "$out" "KV cache             736.00 MiB" "KV cache of the 92 layers that run (2048 positions)"
expect_contains "$out" "of 14240 experts at 12.67 MiB a slot" "89 MoE layers of 160 experts streamed"
grep -qE "1 sequence +8[56][0-9][0-9]\.[0-9] MiB read per token: at most 0\.2[0-9] tok/s" <<<"$out" ||
  fail "disk-bound figure for 1 sequence not as planned: $(grep '1 sequence' <<<"$out")"

json=$(ns model info "$WORK/glm45.gguf" --memory-budget 24GiB --context 2048 --json)
expect_eq "$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["n_layer"], d["kv_bytes_per_token"], d["memory_plan"]["streamed_experts"], d["active_parameters_per_token"])' <<<"$json")" \
  "92 376832 14240 32085616544" "JSON fields"
echo "ok"
