#!/usr/bin/env python3
"""Overwrite one tensor's data in a GGUF file with a NaN pattern, in place.

  gguf_poison.py FILE TENSOR_NAME

For fault-injection tests (#30 N: damaged weights). Reads the GGUF header
(v2/v3: key/value metadata, tensor infos, general.alignment) to find the
tensor's bytes; an F32 tensor gets quiet NaNs (0x7fc00000), any other type
0xff bytes (NaN in F16/BF16 and in the scales of the block formats).
"""
import struct
import sys

SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
# Bytes per element of the unquantized types; others are only located by the next offset.
ELEMENT = {0: 4, 1: 2, 30: 2}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return v[0]

    def string(self):
        n = self.take("Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            inner, n = self.take("I"), self.take("Q")
            return [self.value(inner) for _ in range(n)]
        return self.take(SCALAR[t])


def main():
    path, name = sys.argv[1], sys.argv[2]
    data = bytearray(open(path, "rb").read())
    r = Reader(data)
    if r.take("I") != 0x46554747:
        sys.exit(f"{path}: not a GGUF file")
    r.take("I")
    n_tensors, n_kv = r.take("Q"), r.take("Q")
    alignment = 32
    for _ in range(n_kv):
        key = r.string()
        v = r.value(r.take("I"))
        if key == "general.alignment":
            alignment = v
    infos = []
    for _ in range(n_tensors):
        tname = r.string()
        dims = [r.take("Q") for _ in range(r.take("I"))]
        ttype, offset = r.take("I"), r.take("Q")
        infos.append((offset, tname, dims, ttype))
    base = (r.pos + alignment - 1) // alignment * alignment
    infos.sort()
    for i, (offset, tname, dims, ttype) in enumerate(infos):
        if tname != name:
            continue
        end = infos[i + 1][0] if i + 1 < len(infos) else len(data) - base
        if ttype in ELEMENT:
            count = 1
            for d in dims:
                count *= d
            end = offset + count * ELEMENT[ttype]
        start, stop = base + offset, base + end
        if ttype == 0:
            data[start:stop] = struct.pack("<I", 0x7FC00000) * ((stop - start) // 4)
        else:
            data[start:stop] = b"\xff" * (stop - start)
        open(path, "r+b").write(data)
        return
    sys.exit(f"{path}: no tensor {name}")


main()
