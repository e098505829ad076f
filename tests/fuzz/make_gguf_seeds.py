#!/usr/bin/env python3
"""Writes the seed corpus of the GGUF fuzz target (tests/fuzz/corpus/gguf/): small hand-made GGUF
v3 files that reach every part of the parser (each metadata value type, arrays of numbers and of
strings, the alignment key, tensors of plain and block-quantized types with their data), so that
libFuzzer mutates valid structure instead of guessing the magic. Run it again after changing it;
the files are committed."""
import os
import struct
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "gguf")

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0, GGML_BF16 = 0, 1, 2, 8, 30
# Bytes per block and elements per block of the tensor types used here.
BLOCK = {GGML_F32: (4, 1), GGML_F16: (2, 1), GGML_BF16: (2, 1), GGML_Q8_0: (34, 32),
         GGML_Q4_0: (18, 32)}


def string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STR:
        return string(v)
    if vtype == ARR:
        etype, items = v
        out = struct.pack("<IQ", etype, len(items))
        return out + b"".join(value(etype, x) for x in items)
    return struct.pack(SCALAR[vtype], v)


def gguf(kvs, tensors, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, dims, ggml_type)] with data filled by a pattern."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, vtype, v in kvs:
        head += string(key) + struct.pack("<I", vtype) + value(vtype, v)
    data = b""
    for name, dims, ttype in tensors:
        n = 1
        for d in dims:
            n *= d
        block_bytes, block_elems = BLOCK[ttype]
        size = n // block_elems * block_bytes
        data += b"\0" * (-len(data) % alignment)
        head += string(name) + struct.pack("<I", len(dims))
        head += b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", ttype, len(data))
        data += bytes((i * 37 + 11) % 256 for i in range(size))
    head += b"\0" * (-len(head) % alignment)
    return head + data


def main():
    os.makedirs(OUT, exist_ok=True)
    every_type = [
        ("u8", U8, 7), ("i8", I8, -7), ("u16", U16, 700), ("i16", I16, -700),
        ("u32", U32, 70000), ("i32", I32, -70000), ("f32", F32, 0.5), ("bool", BOOL, True),
        ("str", STR, "grove"), ("u64", U64, 1 << 40), ("i64", I64, -(1 << 40)), ("f64", F64, 0.25),
        ("arr.u32", ARR, (U32, [1, 2, 3])), ("arr.f32", ARR, (F32, [0.5, -1.0])),
        ("arr.str", ARR, (STR, ["<s>", "</s>", "a"])), ("arr.empty", ARR, (I32, [])),
    ]
    seeds = {
        "empty.gguf": gguf([], []),
        "metadata.gguf": gguf(every_type, []),
        "tensors.gguf": gguf([("general.architecture", STR, "none")],
                             [("a.weight", [4], GGML_F32), ("b.weight", [8, 2], GGML_F16),
                              ("c.weight", [4, 2], GGML_BF16)]),
        "quantized.gguf": gguf([("general.alignment", U32, 64)],
                               [("q8.weight", [32, 2], GGML_Q8_0), ("q4.weight", [64], GGML_Q4_0)],
                               alignment=64),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
