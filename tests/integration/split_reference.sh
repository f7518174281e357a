# Split models as the reference writes them: llama.cpp's llama-gguf-split
# shards a generated kimi-k3 and deepseek2 model (--split-max-tensors, with and
# without --no-tensor-first-split), and `nightshift logits` gives the unsplit
# file's output from the first and the last shard, mapped, with pread and with
# io_uring; and llama-gguf-split --merge takes nightshift-make-model's shards back
# into the unsplit model. Skipped (exit 77) without the reference binary: build it with
#   NS_REF_TOOLS="llama-gguf-split" tests/conformance/reference/build_reference.sh [WORKDIR]
# and point NS_REF_BIN_DIR at WORKDIR/build/bin (default /var/tmp/ns-reference/build/bin).
source "$(dirname "$0")/lib.sh"

split_tool="${NS_REF_BIN_DIR:-/var/tmp/ns-reference/build/bin}/llama-gguf-split"
if [[ ! -x "$split_tool" ]]; then
  echo "skipped: no $split_tool (NS_REF_TOOLS=\"llama-gguf-split\" tests/conformance/reference/build_reference.sh," \
       "then NS_REF_BIN_DIR=WORKDIR/build/bin)"
  exit 77
fi

k3=(--arch kimi-k3 --n-embd 64 --n-layer 4 --n-head 2 --n-ff 128 --n-expert 8 --n-expert-used 2 --mla-every 2
    --kda-head-dim 32 --conv-kernel 4 --kl-n-ff-expert 64 --kl-kv-lora-rank 32 --kl-qk-rope-dim 16
    --kl-qk-nope-dim 32 --kl-v-head-dim 32 --attn-res-block 2 --expert-latent 32 --routed-norm true
    --attn-gate true --type Q8_0 --tensor-type _exps=MXFP4)
ds2=(--arch deepseek2 --n-embd 128 --n-layer 3 --n-head 4 --n-ff 256 --n-expert 8 --n-expert-used 2
     --q-lora-rank 64 --kv-lora-rank 32 --qk-rope-dim 16 --qk-nope-dim 32 --v-head-dim 32 --n-ff-expert 64
     --n-shared-expert 1 --n-dense-lead 1 --type Q8_0)

logits() {  # logits MODEL IO_MODE: the JSON without the file's name
  ns logits -m "$1" --io-mode "$2" --json --greedy 4 --top 4 --threads 2 -c 64 -p "The quick brown fox" \
    -p "Once upon a time" | python3 -c 'import json,sys; d=json.load(sys.stdin); [o.pop("model") for o in d]; print(json.dumps(d, sort_keys=True))'
}

for arch in k3 ds2; do
  declare -n flags=$arch
  make_model "$arch.gguf" "${flags[@]}"
  base=$(logits "$WORK/$arch.gguf" mmap)
  [[ "$base" == *greedy* ]] || fail "no logits from the unsplit $arch model: $base"
  for first in "" --no-tensor-first-split; do
    out="$WORK/ref-$arch$first"
    mkdir -p "$out"
    "$split_tool" --split --split-max-tensors 9 $first "$WORK/$arch.gguf" "$out/m" > "$out/split.log" 2>&1 ||
      fail "llama-gguf-split failed: $(cat "$out/split.log")"
    shards=("$out"/m-000*-of-*.gguf)
    ((${#shards[@]} >= 3)) || fail "$arch $first: only ${#shards[@]} shards"
    for mode in mmap pread uring; do
      for shard in "${shards[0]}" "${shards[-1]}"; do
        expect_eq "$(logits "$shard" $mode)" "$base" "$arch $first: logits from the reference's $(basename "$shard") with $mode"
      done
    done
    info=$(ns model info "${shards[0]}")
    expect_contains "$info" "shards: ${#shards[@]}" "model info of the reference's shards"
  done
  # The reference reads the generator's shards: merged back by llama-gguf-split, the unsplit model's logits
  # (a merged file keeps split.count 0, which is one file).
  mkdir -p "$WORK/ours-$arch"
  "$MAKE_MODEL" --out "$WORK/ours-$arch/m.gguf" --seed 1 "${flags[@]}" --split-max-tensors 9 --no-tensor-first-split \
    > /dev/null
  "$split_tool" --merge "$WORK/ours-$arch/m-00001-of-"*.gguf "$WORK/merged-$arch.gguf" > "$WORK/merge.log" 2>&1 ||
    fail "llama-gguf-split --merge refused the generator's shards: $(cat "$WORK/merge.log")"
  expect_eq "$(logits "$WORK/merged-$arch.gguf" mmap)" "$base" "$arch: logits of the generator's shards merged by the reference"
done
echo "ok"
