# nightshiftd decoding several queued jobs together (max_batch 4) on a
# Mixtral-style MoE model: every job's text equals what `nightshift run`
# prints for it alone (greedy and seeded), the results record that jobs
# shared steps, and the log has the batch run's summary line.
source "$(dirname "$0")/lib.sh"

make_model moe.gguf --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 96 --n-expert 8 --n-expert-used 2 \
  --type Q8_0
write_config moe=moe.gguf
echo "max_batch: 4" >> "$CONFIG"

prompts=("The sea was calm" "Once upon a time" "In the morning the hills" "A letter arrived" "Tomorrow"
         "The machine hummed")
ids=()
for i in "${!prompts[@]}"; do
  temp=0
  ((i % 2 == 1)) && temp=0.9  # every other job samples, with its own seed
  ids+=("$(ns submit --config "$CONFIG" --model moe --max-tokens $((6 + 3 * i)) --ignore-eos \
            --temperature "$temp" --seed $((40 + i)) "${prompts[$i]}")")
done

start_daemon --drain
wait_daemon 0

expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" "${#prompts[@]}" "jobs done"
shared=$(sql "SELECT count(*) FROM results WHERE avg_batch_size > 1.5")
((shared >= 3)) || fail "only $shared jobs shared steps with others (avg_batch_size > 1.5)"
grep -q "joining a batch of" "$WORK/daemon.log" || fail "no job joined a running batch"
grep -q "batch run: .* job(s) (at most 4 together)" "$WORK/daemon.log" || fail "no batch run summary line"

# `run` prints the bytes the model made; the daemon stores them as valid
# UTF-8 (a broken sequence becomes U+FFFD, as Python decodes it).
valid_utf8() { python3 -c 'import sys; sys.stdout.write(sys.stdin.buffer.read().decode("utf-8", "replace"))'; }
for i in "${!prompts[@]}"; do
  temp=0
  ((i % 2 == 1)) && temp=0.9
  alone=$(ns run --model "$WORK/moe.gguf" --threads 2 --max-tokens $((6 + 3 * i)) --ignore-eos --temperature "$temp" \
            --seed $((40 + i)) --no-progress "${prompts[$i]}" 2>/dev/null | valid_utf8)
  batched=$(sql "SELECT text FROM results WHERE job_id = ${ids[$i]}")
  expect_eq "$batched" "$alone" "job ${ids[$i]} (temperature $temp) batched vs alone"
done
echo "batched texts equal single runs for ${#prompts[@]} jobs; $(grep 'batch run:' "$WORK/daemon.log" | sed 's/.*batch run: //')"
