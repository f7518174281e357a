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

source "$(dirname "$0")/lib_split.sh"  # the k3 and ds2 shapes, logits MODEL IO_MODE

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
