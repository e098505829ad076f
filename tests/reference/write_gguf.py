#!/usr/bin/env python3
"""A second GGUF writer for grove's tests, written apart from grove's own (src/io/gguf_writer.cc).

Writes a random-weight model of one family (llama, qwen2, qwen3, gemma3, phi3) as another writer
would lay it out: 64-byte alignment (general.alignment), tensors in another order (output first, the
layers backwards, each layer's tensors in reverse), keys in another order and a few that converters
add (general.file_type, general.quantization_version), f32 and f16 tensors. grove and llama.cpp
then read the same file (tests/family_test.cc): what grove accepts from its own writer it must accept
from any.

Usage: write_gguf.py ARCH OUT.gguf   (the standard library only)
"""
import math
import random
import struct
import sys

GGUF_MAGIC = b"GGUF"
ALIGNMENT = 64
U32, I32, F32, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9
T_F32, T_F16 = 0, 1

ARCH = sys.argv[1]
OUT = sys.argv[2]
N_VOCAB, N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, N_FF = 320, 64, 2, 4, 2, 128
HEAD = 32 if ARCH in ("qwen3", "gemma3") else N_EMBD // N_HEAD
Q_DIM, KV_DIM = N_HEAD * HEAD, N_HEAD_KV * HEAD
rng = random.Random(20261125)


def string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = string(key) + struct.pack("<I", vtype)
    if vtype == U32:
        out += struct.pack("<I", value)
    elif vtype == I32:
        out += struct.pack("<i", value)
    elif vtype == F32:
        out += struct.pack("<f", value)
    elif vtype == BOOL:
        out += struct.pack("<?", value)
    elif vtype == STRING:
        out += string(value)
    else:  # (element type, values)
        etype, values = value
        out += struct.pack("<IQ", etype, len(values))
        for v in values:
            out += string(v) if etype == STRING else struct.pack(
                {F32: "<f", I32: "<i"}[etype], v)
    return out


def vocab():
    # The same synthetic SentencePiece vocabulary shape as grove's random models, built here.
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    symbols = ["\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    frontier = list(symbols)
    while len(tokens) < N_VOCAB:
        nxt = []
        for piece in frontier:
            if len(tokens) >= N_VOCAB:
                break
            tokens.append(piece)
            types.append(1)
            nxt += [piece + s for s in symbols]
        frontier = nxt
    scores = [-float(i) if t == 1 else 0.0 for i, t in enumerate(types)]
    return tokens, scores, types


def uniform(n, amplitude):
    return [amplitude * (2 * rng.random() - 1) for _ in range(n)]


def f16(values):
    return struct.pack("<%de" % len(values), *values)


tensors = []  # (name, shape, type, bytes)


def matrix(name, n_in, n_out, gain=1.5, as_f16=True):
    values = uniform(n_in * n_out, gain * math.sqrt(3.0 / n_in))
    data = f16(values) if as_f16 else struct.pack("<%df" % len(values), *values)
    tensors.append((name, [n_in, n_out], T_F16 if as_f16 else T_F32, data))


def vector(name, n, center=1.0, spread=0.1):
    values = [center + spread * (2 * rng.random() - 1) for _ in range(n)]
    tensors.append((name, [n], T_F32, struct.pack("<%df" % n, *values)))


def layer(i):
    p = "blk.%d." % i
    vector(p + "attn_norm.weight", N_EMBD)
    if ARCH == "phi3":
        matrix(p + "attn_qkv.weight", N_EMBD, Q_DIM + 2 * KV_DIM)
    else:
        matrix(p + "attn_q.weight", N_EMBD, Q_DIM)
        matrix(p + "attn_k.weight", N_EMBD, KV_DIM)
        matrix(p + "attn_v.weight", N_EMBD, KV_DIM)
    if ARCH == "qwen2":
        for n, d in (("q", Q_DIM), ("k", KV_DIM), ("v", KV_DIM)):
            vector(p + "attn_%s.bias" % n, d, 0.0, 0.5)
    if ARCH in ("qwen3", "gemma3"):
        vector(p + "attn_q_norm.weight", HEAD)
        vector(p + "attn_k_norm.weight", HEAD)
    matrix(p + "attn_output.weight", Q_DIM, N_EMBD)
    if ARCH == "gemma3":
        vector(p + "post_attention_norm.weight", N_EMBD)
    vector(p + "ffn_norm.weight", N_EMBD)
    if ARCH == "phi3":
        matrix(p + "ffn_up.weight", N_EMBD, 2 * N_FF)
    else:
        matrix(p + "ffn_gate.weight", N_EMBD, N_FF)
        matrix(p + "ffn_up.weight", N_EMBD, N_FF)
    matrix(p + "ffn_down.weight", N_FF, N_EMBD)
    if ARCH == "gemma3":
        vector(p + "post_ffw_norm.weight", N_EMBD)


tied = ARCH in ("qwen2", "gemma3")
vector("output_norm.weight", N_EMBD, 16.0 if tied else 2.7, 1.0)
if not tied:
    matrix("output.weight", N_EMBD, N_VOCAB)
for i in reversed(range(N_LAYER)):
    first = len(tensors)
    layer(i)
    tensors[first:] = reversed(tensors[first:])
matrix("token_embd.weight", N_EMBD, N_VOCAB, gain=0.25, as_f16=False)

a = ARCH + "."
tokens, scores, types = vocab()
meta = [
    kv("general.alignment", U32, ALIGNMENT),
    kv("general.name", STRING, "second writer"),  # not "phi3": llama.cpp wants Phi-3 tokens then
    kv("general.file_type", U32, 1),
    kv("general.quantization_version", U32, 2),
    kv("tokenizer.ggml.model", STRING, "llama"),
    kv("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
    kv("tokenizer.ggml.scores", ARRAY, (F32, scores)),
    kv("tokenizer.ggml.token_type", ARRAY, (I32, types)),
    kv("tokenizer.ggml.bos_token_id", U32, 1),
    kv("tokenizer.ggml.eos_token_id", U32, 2),
    kv("tokenizer.ggml.unknown_token_id", U32, 0),
    kv(a + "rope.freq_base", F32, 10000.0),
    kv(a + "attention.layer_norm_rms_epsilon", F32, 1e-6),
    kv(a + "attention.head_count_kv", U32, N_HEAD_KV),
    kv(a + "attention.head_count", U32, N_HEAD),
    kv(a + "feed_forward_length", U32, N_FF),
    kv(a + "block_count", U32, N_LAYER),
    kv(a + "embedding_length", U32, N_EMBD),
    kv(a + "context_length", U32, 512),
    kv("general.architecture", STRING, ARCH),
]
if HEAD != N_EMBD // N_HEAD:
    meta += [kv(a + "attention.key_length", U32, HEAD), kv(a + "attention.value_length", U32, HEAD)]
if ARCH == "gemma3":
    meta.append(kv(a + "attention.sliding_window", U32, 8))

header = GGUF_MAGIC + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(meta)
offset = 0
infos = b""
for name, shape, ttype, data in tensors:
    infos += string(name) + struct.pack("<I", len(shape))
    infos += b"".join(struct.pack("<Q", d) for d in shape)
    infos += struct.pack("<IQ", ttype, offset)
    offset += (len(data) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
body = header + infos
body += b"\0" * (-len(body) % ALIGNMENT)
with open(OUT, "wb") as f:
    f.write(body)
    for _, _, _, data in tensors:
        f.write(data + b"\0" * (-len(data) % ALIGNMENT))
