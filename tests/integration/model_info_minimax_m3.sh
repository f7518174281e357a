# `model info` on a MiniMax-M3-shaped file (the reference's 60-layer 428B-A23B type; the other dimensions assumed,
# docs/models.md: 6144 wide, 64 heads of 128 over 8 KV heads, 3 dense layers, 256 experts top-8 of 1536 plus a
# shared one, an indexer key of 128 per layer) without its weights: the indexer's key is counted in the KV bytes
# per token beside K and V, the indexers are resident, and the plan streams the 57 MoE layers' experts.
source "$(dirname "$0")/lib.sh"

make_header_only_model mm3.gguf --arch minimax-m3 --n-embd 6144 --n-layer 60 --n-head 64 --n-head-kv 8 \
  --mm3-head-dim 128 --mm3-rope-dim 64 --n-ff 1536 --n-expert 256 --n-expert-used 8 --mm3-n-dense-lead 3 \
  --msa-head-dim 128 --msa-block-size 64 --msa-top-k 32 --rope-base 5000000 --n-ctx 196608 --type Q8_0 \
  --tensor-type _exps=Q4_K

out=$(ns model info "$WORK/mm3.gguf" --memory-budget 24GiB --context 2048 --disk-rate 2.3GiB)
expect_contains "$out" "parameters: 422115804672" "422B with the built-in vocabulary"
expect_contains "$out" "KV cache             510.00 MiB" "K, the indexer key and V of 60 layers (2048 positions)"
expect_contains "$out" "of 14592 experts at 15.20 MiB a slot" "57 MoE layers of 256 experts streamed"
grep -qE "1 sequence +6[0-9]{3}\.[0-9] MiB read per token: at most 0\.3[0-9] tok/s" <<<"$out" ||
  fail "disk-bound figure for 1 sequence not as planned: $(grep '1 sequence' <<<"$out")"

json=$(ns model info "$WORK/mm3.gguf" --memory-budget 24GiB --context 2048 --json)
# 261120 bytes a token: 60 x (8 x 128 K + 128 indexer key + 8 x 128 V) x 2 (F16).
fields='import json, sys
d = json.load(sys.stdin)
print(d["n_layer"], d["kv_bytes_per_token"], d["memory_plan"]["streamed_experts"], d["active_parameters_per_token"])'
expect_eq "$(python3 -c "$fields" <<<"$json")" "60 261120 14592 21903705600" "JSON fields"
echo "ok"
