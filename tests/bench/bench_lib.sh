# Shell helpers shared by the bench scripts (sourced, not run).
#
#   bench_args BUDGET N_LAYER ARG...  the model benches' command line
#                              [BUILD_DIR] [WORK_DIR] [BUDGET] [N_LAYER]: sets
#                              build, work, budget, n_layer (defaults build,
#                              /var/tmp/ns-bench, BUDGET, N_LAYER), then bench_bins
#   bench_bins BUILD           sets bench, gen, cli, daemon: ns_bench_batch,
#                              nightshift-make-model, nightshift, nightshiftd under BUILD
#   bench_env NAME=DEFAULT...  sets each name, lowercased, to the environment's
#                              $NAME, or DEFAULT where that is unset or empty
#   bench_generate WORK NAME FLAGS...  generates (or reuses) a model with
#                              nightshift-make-model FLAGS under WORK (keyed by
#                              the flags and --weights-version) and prints its path
#   bench_model WORK N_LAYER   the DeepSeek-V2-Lite-shaped Q4_0 model
#   machine_line               cores, CPU flags, RAM and load, for a results header
#   bench_require TOOL... -- BIN...  exits 2 naming a missing tool or unbuilt binary
#   llama_batched LIMIT BIN_DIR ARGS...  llama-batched-bench's JSONL lines (whole
#                              model in RAM when LIMIT is 0, else in a memory
#                              cgroup of LIMIT bytes; $LLAMA_TIMEOUT seconds at
#                              most when set); its log on stderr if it fails
#   bench_fio FILE SECONDS     fio O_DIRECT sequential read rate of FILE, GiB/s
#   in_memory_cgroup BYTES CMD...  runs CMD inside a memory cgroup limited to
#                              BYTES (page cache included), then removes the
#                              cgroup; prints the cgroup's peak usage on stderr
#   drop_caches                drops the page cache (root), or warns
#   kv KEY                     reads key=value from a RESULT line on stdin
#   bench_lowbit_model WORK N_LAYER TYPE  a smaller deepseek2 shape (n_embd 1024,
#                              64 experts of 512, top-6) with routed experts in
#                              TYPE (Q4_0, IQ2_XXS, ...), the rest Q8_0; the
#                              i-quants with a uniform importance matrix (speed
#                              only: real files use llama-imatrix's); prints its path
#
# Needs: $gen (the generator binary) for bench_model.

# shellcheck disable=SC2034  # the variables are the caller's
bench_args() {  # default_budget default_n_layer args...
  local default_budget=$1 default_n_layer=$2
  shift 2
  build=${1:-build}
  work=${2:-/var/tmp/ns-bench}
  budget=${3:-$default_budget}
  n_layer=${4:-$default_n_layer}
  bench_bins "$build"
}

# shellcheck disable=SC2034  # the variables are the caller's
bench_bins() {  # build
  bench="$1/engine/ns_bench_batch"
  gen="$1/tools/nightshift-make-model"
  cli="$1/daemon/nightshift"
  daemon="$1/daemon/nightshiftd"
}

bench_env() {  # NAME=DEFAULT...
  local pair name
  for pair in "$@"; do
    name=${pair%%=*}
    printf -v "${name,,}" '%s' "${!name:-${pair#*=}}"
  done
}

bench_model() {  # work n_layer -> path
  local work=$1 n_layer=$2
  bench_generate "$work" "ds2lite-q4_0-L$n_layer" --arch deepseek2 --n-embd 2048 --n-layer "$n_layer" --n-head 16 \
    --n-head-kv 16 --n-ff 10944 --n-expert 64 --n-expert-used 6 --n-ff-expert 1408 --n-shared-expert 2 --n-dense-lead 1 \
    --kv-lora-rank 512 --q-lora-rank 0 --qk-rope-dim 64 --qk-nope-dim 128 --v-head-dim 128 --type Q4_0 --seed 1
}

bench_generate() {  # work name flags... -> path
  local work=$1 name=$2; shift 2
  # Keyed by the flags and the generator's weights version: a changed shape, or
  # a generator that now writes other weights, never reuses an old file.
  local version; version=$("$gen" --weights-version) || return 2
  local key; key=$(printf '%s ' "w$version" "$@" | cksum | cut -d' ' -f1)
  local model="$work/$name-$key.gguf"
  mkdir -p "$work"
  if [[ ! -f $model ]]; then
    local size free
    size=$("$gen" "$@" --print-size-only) || return 2
    free=$(df --output=avail -B1 "$work" | tail -1)
    (( free > size + (1 << 30) )) || { echo "not enough disk in $work: need $size bytes, have $free" >&2; return 2; }
    echo "generating $model ($((size >> 20)) MiB; a few minutes)..." >&2
    "$gen" "$@" --out "$model.tmp" >/dev/null && mv "$model.tmp" "$model"
  fi
  echo "$model"
}

bench_lowbit_model() {  # work n_layer type -> path
  local work=$1 n_layer=$2 type=$3
  local shape=(--arch deepseek2 --n-embd 1024 --n-layer "$n_layer" --n-head 16 --n-ff 4096 --n-expert 64
               --n-expert-used 6 --n-ff-expert 512 --n-shared-expert 2 --n-dense-lead 1 --kv-lora-rank 256
               --q-lora-rank 0 --qk-rope-dim 64 --qk-nope-dim 64 --v-head-dim 64 --seed 1)
  local flags=("${shape[@]}" --type Q8_0 --tensor-type "_exps=$type")
  local model="$work/lowbit-$type-L$n_layer.gguf"
  mkdir -p "$work"
  if [[ $type == IQ* ]]; then
    local imatrix="$work/lowbit-uniform-L$n_layer.imatrix.gguf"
    [[ -f $imatrix ]] || uniform_imatrix "$imatrix" "$n_layer" 64 1024 512
    flags+=(--imatrix "$imatrix" --imatrix-include _exps)
  fi
  if [[ ! -f $model ]]; then
    echo "generating $model ($(( $("$gen" "${flags[@]}" --print-size-only) >> 20 )) MiB)..." >&2
    "$gen" "${flags[@]}" --out "$model.tmp" >/dev/null && mv "$model.tmp" "$model"
  fi
  echo "$model"
}

# An importance matrix in llama-imatrix's GGUF form with every weight 1 for
# the routed experts of layers 1..N_LAYER-1 (gate/up over n_embd, down over n_ff).
uniform_imatrix() {  # out n_layer n_expert n_embd n_ff_expert
  python3 - "$@" <<'PY'
import struct, sys
out, n_layer, n_expert, n_embd, n_ff = sys.argv[1], *map(int, sys.argv[2:])
tensors = []
for l in range(1, n_layer):
    for proj, ne0 in (("gate", n_embd), ("up", n_embd), ("down", n_ff)):
        name = f"blk.{l}.ffn_{proj}_exps.weight"
        tensors += [(name + ".in_sum2", [ne0, n_expert], [1.0] * ne0 * n_expert),
                    (name + ".counts", [1, n_expert], [1.0] * n_expert)]
def s(x): b = x.encode(); return struct.pack("<Q", len(b)) + b
head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 1) + s("general.type") + struct.pack("<I", 8) + s("imatrix")
off, infos, data = 0, b"", b""
for name, dims, vals in tensors:
    infos += s(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", 0, off)
    blob = struct.pack(f"<{len(vals)}f", *vals); blob += b"\0" * (-len(blob) % 32)
    data += blob; off += len(blob)
meta = head + infos
open(out, "wb").write(meta + b"\0" * (-len(meta) % 32) + data)
PY
}

machine_line() {
  local flags
  flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|fma|f16c|avx512(f|bw|vl|_vnni|_bf16)|avx_vnni|amx_.*' |
          tr '\n' ' ')
  echo "$(nproc) cores ($(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); ${flags% })," \
       "$(free -g | awk '/Mem:/ {print $2}') GiB RAM, load $(cut -d' ' -f1-3 /proc/loadavg)"
}

bench_require() {  # tool... -- binary... : exits 2 naming what to install or build ($build: the build dir)
  while [[ $# -gt 0 && $1 != -- ]]; do
    command -v "$1" >/dev/null || { echo "$1 is not installed: apt-get install $1" >&2; exit 2; }
    shift
  done
  [[ $# -eq 0 ]] || shift
  local bin
  for bin in "$@"; do
    [[ -x $bin ]] || { echo "$bin is not built: cmake --build $build --target $(basename "$bin")" >&2; exit 2; }
  done
}

drop_caches() {
  sync
  echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "WARNING: cannot drop the page cache (not root): mmap figures are optimistic" >&2
}

bench_fio() {  # file seconds -> GiB/s: the best of three shapes, each `seconds` long
  # 1 MiB x 16 in flight as plain io_uring, and 1 MiB x 16 and 4 MiB x 8 with
  # registered buffers and files (as our reader uses them: on this VM's disk
  # registration alone is worth up to ~30 %). The disk's rate drifts with the
  # other users of the machine, so the best of the three is the reference.
  local best=0 r cfg
  for cfg in "1M 16 plain" "1M 16 fixed" "4M 8 fixed"; do
    set -- "$1" "$2" $cfg
    local extra=()
    [[ $5 == fixed ]] && extra=(--fixedbufs --registerfiles)
    drop_caches
    r=$(fio --name=seq --filename="$1" --readonly --rw=read --bs="$3" --iodepth="$4" --direct=1 --ioengine=io_uring \
          "${extra[@]}" --runtime="$2" --time_based --output-format=json 2>/dev/null | jq '.jobs[0].read.bw_bytes / 1073741824')
    best=$(jq -n "[$best, $r] | max")
  done
  echo "$best"
}

kv() { awk -v k="$1" '{ for (i = 1; i <= NF; ++i) { n = index($i, "="); if (n && substr($i, 1, n - 1) == k) print substr($i, n + 1) } }'; }

# The memory controller: cgroup v1 (/sys/fs/cgroup/memory) or v2 (memory.max in
# the unified hierarchy). Sets cg_kind and cg_root, or returns 1.
find_memory_cgroup() {
  if [[ -w /sys/fs/cgroup/memory/cgroup.procs ]]; then
    cg_kind=v1; cg_root=/sys/fs/cgroup/memory
  elif [[ -f /sys/fs/cgroup/cgroup.controllers ]] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
    cg_kind=v2; cg_root=/sys/fs/cgroup
    grep -qw memory "$cg_root/cgroup.subtree_control" 2>/dev/null || echo +memory > "$cg_root/cgroup.subtree_control" 2>/dev/null || return 1
  elif [[ -f /sys/fs/cgroup/unified/cgroup.controllers ]] && grep -qw memory /sys/fs/cgroup/unified/cgroup.controllers; then
    cg_kind=v2; cg_root=/sys/fs/cgroup/unified
  else
    return 1
  fi
}

in_memory_cgroup() {  # bytes cmd... ; the command's exit status
  local bytes=$1; shift
  if ! find_memory_cgroup; then
    echo "WARNING: no writable memory cgroup (v1 /sys/fs/cgroup/memory or v2 memory.max): the mmap run is NOT" \
         "memory-limited, its page cache may hold the whole model and its figures mean nothing" >&2
    "$@"
    return
  fi
  local cg="$cg_root/nsbench.$$"
  mkdir -p "$cg" || { echo "WARNING: cannot create $cg: the mmap run is NOT memory-limited" >&2; "$@"; return; }
  if [[ $cg_kind == v1 ]]; then
    echo "$bytes" > "$cg/memory.limit_in_bytes"
    echo "$bytes" > "$cg/memory.memsw.limit_in_bytes" 2>/dev/null || true
  else
    echo "$bytes" > "$cg/memory.max"
    echo 0 > "$cg/memory.swap.max" 2>/dev/null || true
  fi
  local status=0
  # The child joins the cgroup before exec: the whole command is charged to it.
  bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' _ "$cg" "$@" || status=$?
  local peak
  if [[ $cg_kind == v1 ]]; then peak=$(cat "$cg/memory.max_usage_in_bytes")
  else peak=$(cat "$cg/memory.peak" 2>/dev/null || echo 0); fi
  echo "(memory cgroup $cg_kind limit $((bytes >> 20)) MiB, peak usage $((peak >> 20)) MiB incl. page cache)" >&2
  rmdir "$cg" 2>/dev/null || { sleep 1; rmdir "$cg" 2>/dev/null; } || echo "WARNING: could not remove $cg" >&2
  return $status
}

llama_batched() {  # limit_bytes bin_dir args... -> JSONL on stdout; the tool's log on stderr when it fails
  local limit=$1 bin=$2/llama-batched-bench; shift 2
  [[ -x $bin ]] || { echo "$bin is not built: build llama.cpp's llama-batched-bench target" >&2; return 2; }
  local out; out=$(mktemp)
  local cmd=("$bin" "$@" --output-format jsonl) status=0
  # $LLAMA_TIMEOUT (seconds): bound a run that would take hours; the batch
  # sizes it finished are still printed.
  [[ -z ${LLAMA_TIMEOUT:-} ]] || cmd=(timeout "$LLAMA_TIMEOUT" "${cmd[@]}")
  if (( limit > 0 )); then in_memory_cgroup "$limit" "${cmd[@]}" >"$out" 2>&1 || status=$?
  else "${cmd[@]}" >"$out" 2>&1 || status=$?; fi
  grep '^{' "$out" || { echo "llama-batched-bench printed no result (exit $status):" >&2; tail -20 "$out" >&2; }
  grep '^(memory cgroup' "$out" >&2 || true
  rm -f "$out"
  return $status
}
