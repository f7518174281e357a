# Sampling and stop strings on trained weights (examples/models/kjv-moe-q4_0.gguf,
# a MoE trained on the King James Bible and fortune files), where the text means
# something: greedy decoding writes a fortune's attribution line, a stop string
# ends the text before it; a sampled KJV-style continuation through the daemon,
# batched with other jobs, equals `nightshift run` alone with the same seed and
# stops at the end of its sentence.
source "$(dirname "$0")/lib.sh"

MODEL="$NS_SOURCE_DIR/examples/models/kjv-moe-q4_0.gguf"
json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]], end="")' "$1"; }

out=$(ns run --model "$MODEL" --temperature 0 -n 16 --no-progress --json "In the beginning God created" 2>/dev/null)
expect_contains "$(json_field text <<<"$out")" "-- Larry Wall" "greedy text: a fortune's attribution"
out=$(ns run --model "$MODEL" --temperature 0 -n 16 --no-progress --json --stop "--" "In the beginning God created" \
      2>/dev/null)
text=$(json_field text <<<"$out")
expect_eq "$(json_field finish_reason <<<"$out")" "stop" "the stop string ends the generation"
[[ "$text" != *"--"* && "$text" == *"world"* ]] || fail "the text before the stop string: '$text'"

write_config kjv="$MODEL"
args=(--model kjv --max-tokens 24 --temperature 0.8 --seed 42 --stop ".")
ns submit --config "$CONFIG" "${args[@]}" "And the LORD said unto Moses," > /dev/null
ns submit --config "$CONFIG" --model kjv --max-tokens 24 --temperature 0.7 --seed 7 "A fool and his money" > /dev/null
ns submit --config "$CONFIG" --model kjv --max-tokens 24 --temperature 0 "Blessed are the" > /dev/null
start_daemon --drain
wait_daemon 0
expect_eq "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" "3" "the three jobs ran"
alone=$(ns run --model "$MODEL" --max-tokens 24 --temperature 0.8 --seed 42 --stop "." --no-progress --json \
          "And the LORD said unto Moses," 2>/dev/null)
expect_eq "$(sql "SELECT text FROM results WHERE job_id = 1")" "$(json_field text <<<"$alone")" \
  "the sampled job in a batch equals run alone"
expect_eq "$(sql "SELECT finish_reason FROM results WHERE job_id = 1")" "stop" "the sampled job stopped at '.'"
expect_contains "$(sql "SELECT text FROM results WHERE job_id = 1")" "LORD" "a KJV-style continuation"
echo "ok"
