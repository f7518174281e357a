#!/usr/bin/env bash
# nightshift against llama.cpp on one model, in one run (issue 17):
#   - llama.cpp's llama-batched-bench with the whole model in RAM (mmap over a
#     warm page cache, its repack on), and in a memory cgroup of the budget (-nr: no repack, the
#     weights stay in the page cache the cgroup limits; -kvu: one KV buffer for
#     all sequences, which a limit needs with many of them);
#   - nightshift with the whole model in RAM (an expert cache that holds every
#     expert, warmed first) and streaming under the budget (io_mode uring);
#   - for each: decode with 1 and 64 sequences (aggregate tok/s, decode steps
#     only), prefill of one PREFILL_TOKENS prompt, and an end-to-end "nightly"
#     batch: DOCS documents of ~DOC_TOKENS tokens that start with the same
#     PREFIX_TOKENS-token instruction, GEN_TOKENS generated each, (prompt +
#     completion tokens) / wall time. nightshift's nightly batch goes through
#     the queue: `nightshift submit --prompt-lines`, then `nightshiftd --drain`
#     with memory_budget the budget (or RAM_BUDGET "in RAM") and max_batch
#     DOCS (halved by the daemon until it fits); its wall time runs from the
#     first claim to the last finish, less the model load. llama.cpp runs the
#     same counts as batched-bench's pp/tg/pl (random tokens, prompts not
#     shared); nightshift shares the common prefix (prefix_cache, on by
#     default: prefilled once, copied by the other jobs, counted in the
#     results' prefix_tokens and printed);
#   - prints every figure and the ratios nightshift / llama.cpp;
#   - thread scaling: both engines' in-RAM decode and prefill again at each of
#     THREADS' other counts (the runs above use the largest), and a table of
#     tok/s at N threads / at the first count, per engine.
# Decode and prefill run through ns_bench_batch (the engine the daemon runs).
# Not run by ctest. Needs root (memory cgroup, drop_caches), jq and sqlite3.
#
# Usage: tests/bench/compare_llamacpp.sh LLAMA_BIN_DIR MODEL [BUILD_DIR] [WORK_DIR]
#   LLAMA_BIN_DIR holds llama-batched-bench; MODEL any GGUF both engines load
#   (e.g. the DeepSeek-V2-Lite-shaped model of streaming_bench.sh).
#   defaults: build, /var/tmp/ns-bench
#   env: BUDGET (3GiB), RAM_BUDGET (the file's size + 4 GiB), BATCHES (1,64),
#        DECODE_TOKENS (16), PROMPT_TOKENS (8: the decode runs' prompts),
#        PREFILL_TOKENS (512), DOCS (64), DOC_TOKENS (1500), PREFIX_TOKENS (300),
#        GEN_TOKENS (200), SKIP (a list of parts to leave out: llama-ram,
#        llama-limit, ns-ram, ns-stream, decode, prefill, nightly),
#        THREADS (thread counts, 1,NPROC: the largest runs everything, the others
#        the in-RAM decode and prefill for the scaling table; one count: no table),
#        LOG_LEVEL (the daemon's log_level, info; debug logs every step),
#        KEEP (a directory: the nightly runs' daemon logs and queues are copied there)
#        RAM_WARM_TOKENS (0: a warm-up prompt for the in-RAM runs; the cache is filled at load)
#   A quick run: DOCS=8 DOC_TOKENS=96 PREFIX_TOKENS=24 GEN_TOKENS=8 DECODE_TOKENS=4 PREFILL_TOKENS=64
# Build first: cmake --build BUILD_DIR --target ns_bench_batch nightshift nightshiftd
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -ge 2 ]] || { sed -n '/^# Usage/,/^# Build/p' "$0" >&2; exit 2; }
llama_bin=$1
model=$(realpath "$2")
build=${3:-build}
work=${4:-/var/tmp/ns-bench}
model_bytes=$(stat -c %s "$model")
source tests/bench/bench_lib.sh
bench_bins "$build"
bench_env BUDGET=3GiB "RAM_BUDGET=$(( (model_bytes >> 20) + 4096 ))MiB" BATCHES=1,64 DECODE_TOKENS=16 PROMPT_TOKENS=8 \
  PREFILL_TOKENS=512 DOCS=64 DOC_TOKENS=1500 PREFIX_TOKENS=300 GEN_TOKENS=200 "THREADS=1,$(nproc)"
skip=" ${SKIP:-} "

bench_require jq sqlite3 -- "$bench" "$cli" "$daemon"
[[ -x $llama_bin/llama-batched-bench ]] || { echo "$llama_bin/llama-batched-bench is not built" >&2; exit 2; }
[[ $(id -u) == 0 ]] || echo "WARNING: not root: no page-cache drops and no memory cgroup for llama.cpp" >&2
budget_bytes=$(numfmt --from=iec "${budget%iB}")
largest=$(tr , '\n' <<<"$batches" | sort -n | tail -1)
mapfile -t thread_counts < <(tr , '\n' <<<"$threads" | grep . | sort -nu)
threads=${thread_counts[-1]}  # the main runs' count
mkdir -p "$work"
run_dir=$(mktemp -d "$work/compare.XXXXXX")
trap 'rm -rf "$run_dir"' EXIT
wants() { [[ $skip != *" $1 "* ]]; }

echo "== $(date -u '+%F %H:%M UTC'): model $model ($((model_bytes >> 20)) MiB), budget $budget, in RAM $ram_budget," \
     "threads $threads (scaling: ${thread_counts[*]})"
echo "   machine: $(machine_line)"
echo "   decode: batches $batches, $prompt_tokens-token prompts, $decode_tokens tokens each; prefill: $prefill_tokens tokens;" \
     "nightly: $docs documents of ~$doc_tokens tokens ($prefix_tokens shared), $gen_tokens generated each"

# ---- llama.cpp: decode, prefill, nightly; whole model in RAM and in the cgroup
declare -A L  # L[mode.part] = JSONL; the scaling runs' mode is ram-tN
llama_runs() {  # mode limit threads parts extra-args...
  local mode=$1 limit=$2 t=$3 parts=" $4 "; shift 4
  local common=(-m "$model" -t "$t" -b 2048 -ub 512 "$@")
  want() { wants "$1" && [[ $parts == *" $1 "* ]]; }
  echo "== llama.cpp ($mode, $t threads):$parts..." >&2
  drop_caches
  # In RAM: the file read once into the page cache first, as nightshift's
  # in-RAM runs warm their expert cache (llama.cpp maps the experts it does not
  # repack, and would otherwise fault them in from disk during its first steps).
  (( limit > 0 )) || cat "$model" > /dev/null
  ! want decode || L[$mode.decode]=$(llama_batched "$limit" "$llama_bin" "${common[@]}" -c $((largest * (prompt_tokens + decode_tokens) + 64)) \
                      -npp "$prompt_tokens" -ntg "$decode_tokens" -npl "$batches") || echo "WARNING: llama.cpp $mode decode failed" >&2
  ! want prefill || L[$mode.prefill]=$(llama_batched "$limit" "$llama_bin" "${common[@]}" -c $((prefill_tokens + 64)) \
                       -npp "$prefill_tokens" -ntg 1 -npl 1) || echo "WARNING: llama.cpp $mode prefill failed" >&2
  if want nightly; then
    L[$mode.nightly]=$(llama_batched "$limit" "$llama_bin" "${common[@]}" -c $((docs * (doc_tokens + gen_tokens) + 64)) \
                         -npp "$doc_tokens" -ntg "$gen_tokens" -npl "$docs") || echo "WARNING: llama.cpp $mode nightly failed" >&2
  fi
  local p
  for p in decode prefill nightly; do [[ -z ${L[$mode.$p]:-} ]] || sed "s/^/   $mode $p /" <<<"${L[$mode.$p]}"; done
}
! wants llama-ram || llama_runs ram 0 "$threads" "decode prefill nightly"
! wants llama-limit || llama_runs limit "$budget_bytes" "$threads" "decode prefill nightly" -nr -kvu

# ---- nightshift: decode and prefill through ns_bench_batch
declare -A N  # N[mode.part] = RESULT lines; the scaling runs' mode is ram-tN
ns_runs() {  # mode budget threads extra-args...
  local mode=$1 b=$2; shift 2
  set -- --threads "$@"
  echo "== nightshift ($mode, budget $b, $2 threads): decode, prefill..." >&2
  drop_caches
  ! wants decode || N[$mode.decode]=$("$bench" decode "$model" --batch "$batches" --tokens "$decode_tokens" --prompt-tokens "$prompt_tokens" \
                      --max-sequences "$largest" --budget "$b" "$@" 2>/dev/null | grep '^RESULT')
  ! wants prefill || N[$mode.prefill]=$("$bench" prefill "$model" --prompt-tokens "$prefill_tokens" --budget "$b" "$@" 2>/dev/null | grep '^RESULT')
  printf '%s\n' "${N[$mode.decode]:-}" "${N[$mode.prefill]:-}" | grep . | sed "s/^/   $mode /" || true
}
# The in-RAM runs need no warm-up prompt: a budget that holds every expert reads them all at load
# (preload_experts, on by default; RESULT lines print hit_rate 1.0000). The warm-up prompts used before
# left experts unread: 128 tokens 0.25 % of the decode steps' (io_share 0.013), 64 tokens 1 % (0.046)
# (docs/performance.md, session 11).
ram_warm_tokens=${RAM_WARM_TOKENS:-0}
if wants decode || wants prefill; then
  ! wants ns-ram || ns_runs ram "$ram_budget" "$threads" --warm-tokens "$ram_warm_tokens"
  ! wants ns-stream || ns_runs stream "$budget" "$threads"
fi

# ---- nightshift: the nightly batch through the queue and the daemon
declare -A NIGHTLY  # NIGHTLY[mode] = (prompt + completion tokens) / wall seconds
ns_nightly() {  # mode budget
  local mode=$1 b=$2 dir="$run_dir/nightly-$1"
  echo "== nightshift ($mode): the nightly batch through nightshiftd --drain (memory_budget $b, max_batch $docs)..." >&2
  mkdir -p "$dir"
  [[ -f $run_dir/prompts.txt ]] ||
    "$bench" docs "$model" --out "$run_dir/prompts.txt" --count "$docs" --prompt-tokens "$doc_tokens" \
      --prefix-tokens "$prefix_tokens" 2>/dev/null | grep '^docs' | sed 's/^/   /'
  printf '%s\n' "database: q.db" "models:" "  bench: $model" "memory_budget: $b" "io_mode: uring" "max_batch: $docs" \
    "context: $((doc_tokens + gen_tokens + 64))" "poll_interval_ms: 50" "log_level: ${LOG_LEVEL:-info}" > "$dir/config.yaml"
  "$cli" submit --config "$dir/config.yaml" --model bench --max-tokens "$gen_tokens" --ignore-eos --temperature 0 \
    --prompt-lines "$run_dir/prompts.txt" >/dev/null
  drop_caches
  "$daemon" --config "$dir/config.yaml" --drain > "$dir/daemon.log" 2>&1 ||
    { echo "WARNING: nightshiftd failed:" >&2; tail -20 "$dir/daemon.log" >&2; }
  grep -iE 'halv|memory plan|prefill chunk|batch run:' "$dir/daemon.log" | sed 's/^.*\] //' | sed "s/^/   $mode daemon: /" || true
  [[ -z ${KEEP:-} ]] || { mkdir -p "$KEEP" && cp "$dir/daemon.log" "$KEEP/nightly-$mode.log" && cp "$dir/q.db" "$KEEP/nightly-$mode.db"; }
  local done_jobs prompt completion wall_ms load_ms rss_b batch shared
  IFS='|' read -r done_jobs prompt completion wall_ms load_ms rss_b batch shared <<<"$(sqlite3 "$dir/q.db" "
    SELECT count(*), sum(r.prompt_tokens), sum(r.completion_tokens), max(j.finished_ms) - min(j.started_ms),
           max(r.load_ms), max(r.peak_rss_bytes), avg(r.avg_batch_size), sum(r.prefix_tokens)
    FROM jobs j JOIN results r ON r.job_id = j.id WHERE j.state = 'done'")"
  if [[ $done_jobs != "$docs" ]]; then
    echo "WARNING: $done_jobs of $docs nightly jobs done ($mode): no nightly figure; the daemon's log ends:" >&2
    tail -5 "$dir/daemon.log" >&2
    return
  fi
  NIGHTLY[$mode]=$(jq -n "($prompt + $completion) / (($wall_ms - $load_ms) / 1000)")
  printf "   %s nightly: %d jobs, %d prompt + %d completion tokens in %.1f s (+ %.1f s model load): %.2f tok/s," \
    "$mode" "$done_jobs" "$prompt" "$completion" "$(jq -n "($wall_ms - $load_ms) / 1000")" "$(jq -n "$load_ms / 1000")" \
    "${NIGHTLY[$mode]}"
  printf " %.1f jobs decoded together on average, peak RSS %d MiB (budget %s), %d prompt tokens copied from a shared prefix\n" \
    "$batch" "$((rss_b >> 20))" "$b" "$shared"
}
if wants nightly; then
  ! wants ns-ram || ns_nightly ram "$ram_budget"
  ! wants ns-stream || ns_nightly stream "$budget"
fi

# ---- thread scaling: the in-RAM decode and prefill at the other thread counts
for t in "${thread_counts[@]}"; do
  (( t != threads )) || continue
  ! wants llama-ram || llama_runs "ram-t$t" 0 "$t" "decode prefill"
  if wants ns-ram && { wants decode || wants prefill; }; then ns_runs "ram-t$t" "$ram_budget" "$t" --warm-tokens "$ram_warm_tokens"; fi
done

# ---- results
echo
echo "== results ($(date -u '+%F %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)): tok/s; ratio = nightshift / llama.cpp"
lj() { jq -r --argjson n "$3" "select(.pl == \$n) | .$2" <<<"${L[$1]:-}" 2>/dev/null | head -1; }  # key field pl
nr() { grep "batch=$3 " <<<"${N[$1]:-}" | kv "$2"; }                                            # key field batch
fmt() { [[ -n $1 ]] && printf "%.2f" "$1" || printf -- "-"; }
ratio() { [[ -n $1 && -n $2 ]] && jq -n "if $2 > 0 then $1 / $2 * 100 | round / 100 else 0 end" | sed 's/$/x/' || echo -; }
printf "%-34s %12s %12s %12s %12s %10s %10s %14s\n" run "llama RAM" "llama limit" "ns RAM" "ns stream" \
  "RAM/RAM" "str/limit" "str/llama RAM"
row() {  # label llama-ram llama-limit ns-ram ns-stream
  printf "%-34s %12s %12s %12s %12s %10s %10s %14s\n" "$1" "$(fmt "$2")" "$(fmt "$3")" "$(fmt "$4")" "$(fmt "$5")" \
    "$(ratio "$4" "$2")" "$(ratio "$5" "$3")" "$(ratio "$5" "$2")"
}
for n in ${batches//,/ }; do
  row "decode, $n sequence(s)" "$(lj ram.decode speed_tg "$n")" "$(lj limit.decode speed_tg "$n")" \
    "$(nr ram.decode tok_s "$n")" "$(nr stream.decode tok_s "$n")"
done
row "prefill, $prefill_tokens tokens" "$(lj ram.prefill speed_pp 1)" "$(lj limit.prefill speed_pp 1)" \
  "$(kv tok_s <<<"${N[ram.prefill]:-}")" "$(kv tok_s <<<"${N[stream.prefill]:-}")"
if wants nightly; then
  row "nightly, $docs docs (all tok / wall)" "$(lj ram.nightly speed "$docs")" "$(lj limit.nightly speed "$docs")" \
    "${NIGHTLY[ram]:-}" "${NIGHTLY[stream]:-}"
fi
echo "ns stream peak RSS (decode, prefill): $(printf '%s\n' "${N[stream.decode]:-}" "${N[stream.prefill]:-}" |
  kv peak_rss_mib | sort -n | tail -1) MiB (budget $((budget_bytes >> 20)) MiB)"
if (( ${#thread_counts[@]} > 1 )); then
  first=${thread_counts[0]}
  echo
  echo "== thread scaling, whole model in RAM (load $(cut -d' ' -f1-3 /proc/loadavg)): tok/s, and at N threads / at $first"
  printf "%-34s %8s %12s %10s %12s %10s\n" run threads "llama RAM" scaling "ns RAM" scaling
  mode_at() { (( $1 == threads )) && echo ram || echo "ram-t$1"; }
  scaling_row() {  # label threads llama llama-at-first ns ns-at-first
    printf "%-34s %8s %12s %10s %12s %10s\n" "$1" "$2" "$(fmt "$3")" "$(ratio "$3" "$4")" "$(fmt "$5")" "$(ratio "$5" "$6")"
  }
  for n in ${batches//,/ }; do
    for t in "${thread_counts[@]}"; do
      scaling_row "decode, $n sequence(s)" "$t" "$(lj "$(mode_at "$t").decode" speed_tg "$n")" \
        "$(lj "$(mode_at "$first").decode" speed_tg "$n")" "$(nr "$(mode_at "$t").decode" tok_s "$n")" \
        "$(nr "$(mode_at "$first").decode" tok_s "$n")"
    done
  done
  for t in "${thread_counts[@]}"; do
    scaling_row "prefill, $prefill_tokens tokens" "$t" "$(lj "$(mode_at "$t").prefill" speed_pp 1)" \
      "$(lj "$(mode_at "$first").prefill" speed_pp 1)" "$(kv tok_s <<<"${N[$(mode_at "$t").prefill]:-}")" \
      "$(kv tok_s <<<"${N[$(mode_at "$first").prefill]:-}")"
  done
fi
