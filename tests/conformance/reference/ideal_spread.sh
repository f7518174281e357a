#!/usr/bin/env bash
# ideal_spread.sh OUT_DIR GENERATOR-ARGS...
#
# How far a quantized model's prompt logits are from the file's F32 ideal (the same weights dequantized by
# llama-quantize) for every equally valid mode of both engines: the reference whole, token by token
# (NS_REF_UBATCH=1) and with its repacked weight layouts (NS_REF_REPACK=1, its default), and nightshift through
# each kernel path (ns_trace_dump, NS_CPU_FEATURES). Prompts: prompts.txt; compared: the ids in both top-8 lists.
# The figures in docs/models.md ("The reference's own spread") come from it. Needs the build (nightshift-make-model,
# ns_trace_dump) and the reference (build_reference.sh with NS_REF_TOOLS=llama-quantize).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${NS_BUILD:-$here/../../../build}"
ref="${NS_REFERENCE:-/var/tmp/ns-reference}/build"
out="$1"
shift
mkdir -p "$out"
cd "$out"
"$build/tools/nightshift-make-model" "$@" --out q.gguf >/dev/null
"$ref/bin/llama-quantize" --allow-requantize q.gguf ideal.gguf F32 >quantize.log 2>&1
dump() { "$ref/ns-ref-dump" "$1" "$here/prompts.txt" 8 16 >"$2" 2>>dump.log; }
dump ideal.gguf ideal.json
dump q.gguf ref-whole.json
NS_REF_UBATCH=1 dump q.gguf ref-token-by-token.json
NS_REF_REPACK=1 dump q.gguf ref-repacked.json
cases=$(python3 -c "import json; print(len(json.load(open('ref-whole.json'))))")
for isa in avx512 avx2 scalar; do
  for ((c = 0; c < cases; ++c)); do
    rm -rf trace && mkdir trace
    NS_CPU_FEATURES=$isa "$build/tests/conformance/ns_trace_dump" q.gguf ref-whole.json "$c" trace >/dev/null 2>&1
    python3 - "$c" "ours-$isa.json" <<'PY'
import array, glob, heapq, json, os, struct, sys
case, out = int(sys.argv[1]), sys.argv[2]
tops = []
for f in sorted(glob.glob('trace/result_output.*.bin'), key=lambda p: int(p.split('.')[-2])):
    b = open(f, 'rb').read()
    width, n = struct.unpack('4q', b[:32])[:2]
    a = array.array('f')
    a.frombytes(b[32:])
    for t in range(n):
        r = a[t * width:(t + 1) * width]
        tops.append([[i, float(r[i])] for i in heapq.nlargest(8, range(width), key=lambda i: r[i])])
runs = json.load(open(out)) if case > 0 and os.path.exists(out) else []
runs.append({'prompt_top_logits': tops})
json.dump(runs, open(out, 'w'))
PY
  done
done
python3 - <<'PY'
import json
def load(p): return [c['prompt_top_logits'] for c in json.load(open(p))]
def dist(a, b):
    mx = tot = 0.0; n = 0
    for ca, cb in zip(a, b):
        for ra, rb in zip(ca, cb):
            ref = dict((i, l) for i, l in ra)
            for i, l in rb:
                if i in ref:
                    d = abs(ref[i] - l); tot += d; n += 1; mx = max(mx, d)
    return mx, tot / n
runs = ['ref-whole', 'ref-token-by-token', 'ref-repacked', 'ours-avx512', 'ours-avx2', 'ours-scalar']
ideal = load('ideal.json')
for r in runs:
    print('%-20s vs the ideal: max %.3f mean %.5f' % ((r,) + dist(ideal, load(r + '.json'))))
for a, b in [('ref-whole', 'ref-repacked'), ('ref-whole', 'ref-token-by-token'), ('ref-whole', 'ours-avx512'),
             ('ours-avx512', 'ours-scalar')]:
    print('%s vs %s: max %.3f mean %.4f' % ((a, b) + dist(load(a + '.json'), load(b + '.json'))))
PY
