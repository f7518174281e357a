# `model info` on a real model's shape without its weights: a Kimi-Linear-48B-A3B
# header over a sparse, all-zero data section (26 GiB that take no disk space)
# prints the 8 GiB memory plan with the KDA recurrent state as its own line and
# the disk-bound speed at 1 sequence and at the batch that touches every expert.
source "$(dirname "$0")/lib.sh"

make_header_only_model kl48b.gguf --arch kimi-linear --n-embd 2304 --n-layer 27 --n-head 32 --n-ff 9216 --n-expert 256 \
  --n-expert-used 8 --mla-every 4 --kda-head-dim 128 --kl-kv-lora-rank 512 --kl-qk-rope-dim 64 --kl-qk-nope-dim 128 \
  --kl-v-head-dim 128 --kl-n-ff-expert 1024 --n-ctx 1048576 --type Q8_0 --tensor-type _exps=Q4_K
size=$(stat -c %s "$WORK/kl48b.gguf")
((size > 25 * 1024 * 1024 * 1024)) || fail "the 48B header file is only $size bytes"

out=$(ns model info "$WORK/kl48b.gguf" --memory-budget 8GiB --context 8192 --disk-rate 2.3GiB)
expect_contains "$out" "parameters: 48380465696" "48B parameters"
expect_contains "$out" "recurrent state      134.86 MiB  (delta-rule layers, fixed per sequence)" \
  "recurrent state line: the sequence and the 2 prefix-cache snapshots"
expect_contains "$out" "KV cache              54.00 MiB" "KV cache of the 7 MLA layers only"
# The cache's share depends on the process's own measured overhead by a slot or two: match the figures' range.
# (The plan sizes the prefill activations from the budget, as the daemon's engine does.)
grep -qE "1 sequence +5[89][0-9]\.[0-9] MiB read per token: at most (3\.9|4\.0)[0-9] tok/s" <<<"$out" ||
  fail "disk-bound figure for 1 sequence not as planned: $(grep '1 sequence' <<<"$out")"
expect_contains "$out" "146 sequences" "the batch that touches every expert"

json=$(ns model info "$WORK/kl48b.gguf" --memory-budget 8GiB --context 8192 --disk-rate 2.3GiB --json)
expect_eq "$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["recurrent_bytes_per_sequence"], d["memory_plan"]["recurrent_bytes"], d["disk_bound"]["full_batch"])' <<<"$json")" \
  "47136768 141410304 146" "JSON fields"  # the sequence's recurrent state and the 2 prefix-cache snapshots'
# As the daemon plans it: max_batch sequences sharing a KV cache (a plan-only load allocates none).
out=$(ns model info "$WORK/kl48b.gguf" --memory-budget 8GiB --context 8192 --max-batch 16)
expect_contains "$out" "for 16 sequence(s) of up to 8192 tokens sharing a KV cache of 131072 tokens" "the plan's batch"
expect_contains "$out" "KV cache             864.00 MiB" "16 sequences' KV cache"
out=$(ns model info "$WORK/kl48b.gguf" --memory-budget 8GiB --context 131072 --max-batch 64)
# 64 x 128K does not fit 8 GiB: the daemon keeps the 64 slots and halves the KV cache they share
# (docs/long-context.md) until the plan fits; the trade-off line says what full-length batches would fit.
# (Without the daemon's 2 prefix-cache snapshots, 524288 tokens fit, with the expert cache at its floor.)
expect_contains "$out" "for 64 sequence(s) of up to 131072 tokens sharing a KV cache of 262144 tokens" \
  "the KV cache, not the batch, is halved to fit"
expect_contains "$out" "KV cache               1.69 GiB  (a pool of 262144 tokens shared by 64 sequences of at most 131072; 2 prefix-cache snapshots (rows from the pool))" \
  "the plan's KV line names the pool"
out0=$(ns model info "$WORK/kl48b.gguf" --memory-budget 8GiB --context 131072 --max-batch 64 --prefix-cache 0)
expect_contains "$out0" "KV cache               3.38 GiB  (a pool of 524288 tokens shared by 64 sequences of at most 131072)" \
  "without prefix snapshots"
# (The 4K end moves with the measured overhead by a sequence or two: match the long end.)
grep -qE "max_batch x context that fit: [0-9]+ x 4K, [0-9]+ x 8K, .* 7 x 128K, 3 x 256K, 1 x 512K$" <<<"$out" ||
  fail "the batch x context trade-off: $(grep 'that fit' <<<"$out")"
echo "ok"
