#!/usr/bin/env bash
# Makes a model whose quantized tensors are the reference's own bytes, for the
# goldens of the low-bit mixes (make_goldens.sh calls it for every entry with
# --imatrix), and checks that nightshift-make-model writes the same bytes, so
# that the conformance test, which has no reference, can make the file again:
#
#   1. the generator writes the F32 model of the entry's shape (its arguments
#      without --type, --tensor-type, --imatrix, --imatrix-include);
#   2. if the --imatrix file is not in the repository yet, llama-imatrix makes
#      it on prompts.txt from that F32 model (commit it: a few tens of KB);
#   3. llama-quantize quantizes the F32 model with it: --type as the file type,
#      each --tensor-type as is (put patterns that no two share: llama-quantize
#      takes the first match, the generator the last), --imatrix-include as
#      --include-weights, --pure so no other tensor changes type;
#   4. the generator writes the entry as given, and every tensor's data must be
#      byte-identical to llama-quantize's (printed per tensor; a mismatch is a
#      bug in nightshift's quantizer and fails the script).
# The reference-quantized file is left at OUT.
#
#   tests/conformance/reference/reference_quantize.sh GENERATOR REF_BIN_DIR OUT GENERATOR_ARGS...
#
# REF_BIN_DIR holds llama-quantize and llama-imatrix (build_reference.sh with
# NS_REF_TOOLS="llama-quantize llama-imatrix"). A relative --imatrix path is
# relative to the repository root.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
gen="$1" refbin="$2" out="$3"
shift 3
for tool in llama-quantize llama-imatrix; do
  [ -x "$refbin/$tool" ] || { echo "no $refbin/$tool: build it (NS_REF_TOOLS=\"llama-quantize llama-imatrix\" $here/build_reference.sh)" >&2; exit 1; }
done
shape=() quant=() imatrix="" type="" tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
while [ $# -gt 0 ]; do
  case "$1" in
    --type) type="$2"; shift 2 ;;
    --tensor-type) quant+=(--tensor-type "$2"); shift 2 ;;
    --imatrix) imatrix="$2"; shift 2 ;;
    --imatrix-include) quant+=(--include-weights "$2"); shift 2 ;;
    *) shape+=("$1"); shift ;;
  esac
done
[ -n "$imatrix" ] && [ -n "$type" ] || { echo "reference_quantize.sh: the arguments need --type and --imatrix" >&2; exit 1; }
case "$imatrix" in /*) imatrix_path="$imatrix" ;; *) imatrix_path="$root/$imatrix" ;; esac

"$gen" "${shape[@]}" --type F32 --out "$tmp/f32.gguf" >/dev/null
if [ ! -f "$imatrix_path" ]; then
  mkdir -p "$(dirname "$imatrix_path")"
  # The whole of prompts.txt in chunks of 64 tokens (llama-imatrix needs at least two).
  "$refbin/llama-imatrix" -m "$tmp/f32.gguf" -f "$here/prompts.txt" -c 64 -b 64 -t 2 --no-ppl \
    -o "$imatrix_path" > "$tmp/imatrix.log" 2>&1 || { tail -20 "$tmp/imatrix.log" >&2; exit 1; }
  echo "made $imatrix ($(stat -c %s "$imatrix_path") bytes): commit it" >&2
fi
"$refbin/llama-quantize" --imatrix "$imatrix_path" --pure "${quant[@]}" "$tmp/f32.gguf" "$out" "$type" \
  > "$tmp/quantize.log" 2>&1 || { tail -20 "$tmp/quantize.log" >&2; exit 1; }
"$gen" "${shape[@]}" --type "$type" "${quant[@]/--include-weights/--imatrix-include}" --imatrix "$imatrix_path" \
  --out "$tmp/ns.gguf" >/dev/null
python3 - "$out" "$tmp/ns.gguf" <<'PY'
# Per-tensor comparison of the data of two GGUF files (v3, little-endian).
import struct, sys
# ggml type id -> (block elements, block bytes), for the types these mixes use
SIZES = {0: (1, 4), 1: (1, 2), 8: (32, 34), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
         14: (256, 210), 16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 23: (256, 136),
         29: (256, 56), 30: (1, 2), 2: (32, 18), 34: (256, 54), 35: (256, 66)}
NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 8: "Q8_0", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K",
         16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 23: "IQ4_XS", 29: "IQ1_M", 30: "BF16",
         34: "TQ1_0", 35: "TQ2_0"}
def tensors(path):
    b = open(path, "rb").read()
    pos = 0
    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, b, pos); pos += struct.calcsize("<" + fmt); return v[0]
    def string():
        nonlocal pos
        n = take("Q"); s = b[pos:pos + n].decode(); pos += n; return s
    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    def value(t):
        if t == 8: return string()
        if t == 9:
            et, n = take("I"), take("Q"); return [value(et) for _ in range(n)]
        return take(scalar[t])
    assert b[:4] == b"GGUF", path
    pos = 4; take("I"); nt, nkv = take("Q"), take("Q")
    kv = {}
    for _ in range(nkv):
        k = string(); kv[k] = value(take("I"))
    infos = []
    for _ in range(nt):
        name = string(); dims = [take("Q") for _ in range(take("I"))]; t = take("I"); off = take("Q")
        infos.append((name, dims, t, off))
    align = kv.get("general.alignment", 32)
    start = (pos + align - 1) // align * align
    out = {}
    for name, dims, t, off in infos:
        n = 1
        for d in dims: n *= d
        be, bb = SIZES[t]
        out[name] = (t, b[start + off:start + off + n // be * bb])
    return out
ref, ours = tensors(sys.argv[1]), tensors(sys.argv[2])
bad = 0
for name, (t, data) in ref.items():
    if name not in ours:
        print(f"  MISSING {name} (not in nightshift's file)"); bad += 1; continue
    t2, data2 = ours[name]
    same = t == t2 and data == data2
    diff = sum(x != y for x, y in zip(data, data2)) if t == t2 and len(data) == len(data2) else len(data)
    print(f"  {'match   ' if same else 'MISMATCH'} {name:32s} {NAMES.get(t, t):>8s} {len(data):9d} bytes"
          + ("" if same else f" (nightshift: {NAMES.get(t2, t2)}, {diff} bytes differ)"))
    bad += not same
for name in ours.keys() - ref.keys():
    print(f"  EXTRA   {name} (only in nightshift's file)"); bad += 1
print(f"  {len(ref) - bad} of {len(ref)} tensors byte-identical to llama-quantize's")
sys.exit(1 if bad else 0)
PY
