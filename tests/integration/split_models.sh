# Split models (gguf-split's shards, engine/gguf/gguf_set.h) through the real
# binaries: nightshift-make-model --split-max-tensors writes a kimi-k3 and a
# deepseek2 model as shards (with and without a metadata-only first shard);
# `nightshift logits` gives the unsplit file's output from any shard, mapped,
# with pread and with io_uring; `model info` lists the shards; a job of the
# daemon runs on a split model; a missing shard is refused naming it.
source "$(dirname "$0")/lib.sh"

source "$(dirname "$0")/lib_split.sh"  # the k3 and ds2 shapes, logits MODEL IO_MODE

for arch in k3 ds2; do
  declare -n flags=$arch
  make_model "$arch.gguf" "${flags[@]}"
  base=$(logits "$WORK/$arch.gguf" mmap)
  [[ "$base" == *greedy* ]] || fail "no logits from the unsplit $arch model: $base"
  for first in "" --no-tensor-first-split; do
    mkdir -p "$WORK/$arch$first"
    "$MAKE_MODEL" --out "$WORK/$arch$first/m.gguf" --seed 1 "${flags[@]}" --split-max-tensors 9 $first > /dev/null
    shards=("$WORK/$arch$first"/m-000*-of-*.gguf)
    ((${#shards[@]} >= 3)) || fail "$arch $first: only ${#shards[@]} shards"
    [[ ! -e "$WORK/$arch$first/m.gguf" ]] || fail "the unsplit file was left beside the shards"
    for mode in mmap pread uring; do
      for shard in "${shards[0]}" "${shards[-1]}"; do
        expect_eq "$(logits "$shard" $mode)" "$base" "$arch $first logits from $(basename "$shard") with $mode"
      done
    done
  done
done

# model info: the shards, their bytes and devices; the rest as for the unsplit file.
dir="$WORK/k3--no-tensor-first-split"
shards=("$dir"/m-000*-of-*.gguf)
info=$(ns model info "${shards[1]}")
expect_contains "$info" "shards: ${#shards[@]}" "the shard count"
dev=$(stat -c '%Hd:%Ld' "${shards[0]}")
expect_contains "$info" "  ${shards[0]}  $(stat -c %s "${shards[0]}") bytes" "the first shard's bytes"
expect_contains "$info" "device $dev" "the shard's device"
whole=$(ns model info "$WORK/k3.gguf")
[[ "$whole" != *shards:* ]] || fail "model info lists shards for an unsplit file"
expect_eq "$(grep '^parameters:' <<<"$info")" "$(grep '^parameters:' <<<"$whole")" "the parameters of the split model"

# The daemon: a config's models: entry naming a later shard; the job's text is the unsplit model's.
write_config "k3split=k3--no-tensor-first-split/$(basename "${shards[-1]}")"
id=$(ns submit --config "$CONFIG" --model k3split --max-tokens 6 --ignore-eos --temperature 0 "Hello there")
start_daemon --drain
wait_daemon 0
expect_eq "$(job_state "$id")" "done" "the job on the split model"
alone=$(ns run --model "$WORK/k3.gguf" --threads 2 --max-tokens 6 --ignore-eos --temperature 0 --no-progress \
          "Hello there" 2>/dev/null | valid_utf8)
expect_eq "$(sql "SELECT text FROM results WHERE job_id = $id")" "$alone" "the daemon's text vs the unsplit file's"

# A missing shard: refused, naming it.
rm "${shards[2]}"
expect_exit 4 "$NIGHTSHIFT" logits -m "${shards[0]}" -p hi
expect_contains "$OUT" "$(basename "${shards[2]}")" "the missing shard named"
expect_contains "$OUT" "missing" "why"
echo "ok"
