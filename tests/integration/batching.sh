# nightshiftd decoding several queued jobs together (max_batch 4) on a
# Mixtral-style MoE model: every job's text equals what `nightshift run`
# prints for it alone (greedy and seeded), the results record that jobs
# shared steps, and the log has the batch run's summary line. Run for a
# Mixtral-style model, a kimi-linear one (recurrent KDA state per slot), and
# the 2026 families minimax-m2, minimax-m3, bailingmoe2, bailingmoe3 and deepseek4.
source "$(dirname "$0")/lib.sh"

# One model: six jobs through max_batch 4, each text equal to `nightshift run` alone.
batch_case() {
  local name=$1
  shift
  make_model "$name.gguf" "$@"
  rm -f "$DB" "$DB-wal" "$DB-shm"
  write_config m="$name.gguf"
  echo "max_batch: 4" >> "$CONFIG"

  prompts=("The sea was calm" "Once upon a time" "In the morning the hills" "A letter arrived" "Tomorrow"
           "The machine hummed")
  ids=()
  for i in "${!prompts[@]}"; do
    temp=0
    ((i % 2 == 1)) && temp=0.9  # every other job samples, with its own seed
    ids+=("$(ns submit --config "$CONFIG" --model m --max-tokens $((6 + 3 * i)) --ignore-eos \
              --temperature "$temp" --seed $((40 + i)) "${prompts[$i]}")")
  done

  start_daemon --drain
  wait_daemon 0

  expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" "${#prompts[@]}" "jobs done"
  shared=$(sql "SELECT count(*) FROM results WHERE avg_batch_size > 1.5")
  ((shared >= 3)) || fail "only $shared jobs shared steps with others (avg_batch_size > 1.5)"
  grep -q "joining a batch of" "$WORK/daemon.log" || fail "no job joined a running batch"
  grep -q "batch run: .* job(s) (at most 4 together)" "$WORK/daemon.log" || fail "no batch run summary line"

  # `run` prints the bytes the model made, the daemon stores valid UTF-8 (valid_utf8, lib.sh).
  for i in "${!prompts[@]}"; do
    temp=0
    ((i % 2 == 1)) && temp=0.9
    alone=$(ns run --model "$WORK/$name.gguf" --threads 2 --max-tokens $((6 + 3 * i)) --ignore-eos --temperature "$temp" \
              --seed $((40 + i)) --no-progress "${prompts[$i]}" 2>/dev/null | valid_utf8)
    batched=$(sql "SELECT text FROM results WHERE job_id = ${ids[$i]}")
    expect_eq "$batched" "$alone" "job ${ids[$i]} (temperature $temp) batched vs alone"
  done
  echo "batched texts equal single runs for ${#prompts[@]} jobs; $(grep 'batch run:' "$WORK/daemon.log" | sed 's/.*batch run: //')"
}

batch_case moe --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 96 --n-expert 8 --n-expert-used 2 --type Q8_0
# kimi-linear: each slot keeps its own KDA state; a job joining a slot starts from zero state.
batch_case kimi-linear --arch kimi-linear --n-embd 64 --n-layer 4 --n-head 2 --n-ff 128 --n-expert 8 --n-expert-used 2 \
  --mla-every 2 --kda-head-dim 32 --kl-n-ff-expert 64 --kl-kv-lora-rank 32 --kl-qk-rope-dim 16 --kl-qk-nope-dim 32 \
  --kl-v-head-dim 32 --type Q8_0 --tensor-type _exps=MXFP4
# minimax-m2 (full-width Q/K norms: one norm over all heads of a token) and bailingmoe2 (fused QKV, group-limited
# routing, a shared expert, a dense lead layer, a NextN block that is never read).
batch_case minimax-m2 --arch minimax-m2 --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --mm-head-dim 16 --n-ff 64 \
  --n-expert 8 --n-expert-used 2 --type Q8_0
batch_case bailingmoe2 --arch bailingmoe2 --n-embd 64 --n-layer 3 --n-head 4 --n-head-kv 2 --n-ff 96 --n-expert 8 \
  --n-expert-used 2 --ling-n-ff-expert 64 --ling-n-expert-group 4 --ling-n-expert-group-used 2 --type Q8_0
# bailingmoe3: KDA states per slot beside rotated MLA with a per-head gate.
batch_case bailingmoe3 --arch bailingmoe3 --n-embd 64 --n-layer 3 --n-head 4 --n-ff 96 --n-expert 8 \
  --n-expert-used 2 --ling3-group 3 --ling3-kda-head-dim 16 --ling3-n-ff-expert 64 --ling3-n-ff-shexp 64 --type Q8_0
# deepseek32 and glm-dsa: the indexer's top-8 positions, so the longer jobs attend sparsely.
batch_case deepseek32 --arch deepseek32 --n-embd 64 --n-layer 2 --n-head 4 --n-ff 96 --n-expert 8 --n-expert-used 2 \
  --q-lora-rank 64 --kv-lora-rank 32 --dsa-heads 4 --dsa-head-dim 64 --dsa-top-k 8 --type Q8_0
batch_case glm-dsa --arch glm-dsa --n-embd 64 --n-layer 2 --n-head 4 --n-ff 96 --n-expert 8 --n-expert-used 2 \
  --q-lora-rank 64 --kv-lora-rank 32 --dsa-heads 4 --dsa-head-dim 64 --dsa-top-k 8 --dsa-types 1,0 --type Q8_0
# minimax-m3: MiniMax sparse attention, 2 kept blocks of 4 per KV group (so the longer jobs attend sparsely), a
# dense lead layer, a shared expert, swigluoai.
batch_case minimax-m3 --arch minimax-m3 --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --mm3-head-dim 16 --n-ff 64 \
  --n-expert 8 --n-expert-used 2 --msa-head-dim 16 --msa-block-size 4 --msa-top-k 2 --type Q8_0
# deepseek4: hyper-connections, compressed blocks of 4 (the indexer's top-k) and 128, hash routing.
batch_case deepseek4 --arch deepseek4 --n-embd 64 --n-layer 3 --n-head 4 --n-ff 32 --n-expert 8 --n-expert-used 2 \
  --dsv4-head-dim 32 --dsv4-rope-dim 16 --dsv4-q-lora-rank 32 --dsv4-o-lora-rank 16 --dsv4-ratios 0,4,128 \
  --dsv4-hash-layers 1 --dsv4-window 8 --dsv4-top-k 4 --type Q8_0
