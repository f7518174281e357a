# What the split-model tests share (sourced after lib.sh): a kimi-k3 and a
# deepseek2 shape to shard, and logits MODEL IO_MODE, `nightshift logits`' JSON
# without the file's name, to compare a shard's output with the unsplit file's.
k3=(--arch kimi-k3 --n-embd 64 --n-layer 4 --n-head 2 --n-ff 128 --n-expert 8 --n-expert-used 2 --mla-every 2
    --kda-head-dim 32 --conv-kernel 4 --kl-n-ff-expert 64 --kl-kv-lora-rank 32 --kl-qk-rope-dim 16
    --kl-qk-nope-dim 32 --kl-v-head-dim 32 --attn-res-block 2 --expert-latent 32 --routed-norm true
    --attn-gate true --type Q8_0 --tensor-type _exps=MXFP4)
ds2=(--arch deepseek2 --n-embd 128 --n-layer 3 --n-head 4 --n-ff 256 --n-expert 8 --n-expert-used 2
     --q-lora-rank 64 --kv-lora-rank 32 --qk-rope-dim 16 --qk-nope-dim 32 --v-head-dim 32 --n-ff-expert 64
     --n-shared-expert 1 --n-dense-lead 1 --type Q8_0)

# logits MODEL IO_MODE: the JSON without the file's name.
logits() {
  ns logits -m "$1" --io-mode "$2" --json --greedy 4 --top 4 --threads 2 -c 64 -p "The quick brown fox" \
    -p "Once upon a time" | python3 -c 'import json,sys; d=json.load(sys.stdin); [o.pop("model") for o in d]; print(json.dumps(d, sort_keys=True))'
}
