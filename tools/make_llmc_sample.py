#!/usr/bin/python3
"""Writes a small GPT-2 in three formats with Python's struct, json and random only, so the C++
readers of src/nn/checkpoint/ are tested against files that mpitron did not write:

  tests/data/llmc_sample_f32.bin        llm.c's model file, version 3 (float32)
  tests/data/llmc_sample_bf16.bin       the same weights, version 5 (bfloat16)
  tests/data/hf_gpt2_sample.safetensors Hugging Face's GPT-2 names: no "transformer." prefix,
                                        Conv1D weights [in, out], wte [V, C] unpadded, and the
                                        causal-mask buffers h.{i}.attn.bias
  tests/data/llmc_sample_expected.safetensors
                                        the same weights under mpitron's canonical names
                                        (q, k, v apart, weights [out, in], wte [Vp, C])

Sizes: maxT 32, V 70, Vp 128, L 2, NH 2, C 16. Every weight is a random normal value cut to
bfloat16 precision (its low 16 bits zero), so the float32 and bfloat16 files hold the same
values; the padding rows V .. Vp-1 of wte are zero, as llm.c writes them. The llm.c layout (the
one llm.c's train_gpt2.c reads in gpt2_build_from_checkpoint): 256 int32 header (20240326,
version, maxT, V, L, NH, C, Vp, zeros), then wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw,
attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb (each stacked over the layers, a layer's qkvw
rows q, then k, then v), lnfw, lnfb. tests/nn/test_gpt2_weights.cpp reads them.

    /usr/bin/python3 tools/make_llmc_sample.py
"""
import json
import math
import os
import random
import struct

MAX_T, V, VP, L, NH, C = 32, 70, 128, 2, 2, 16
DATA = os.path.join(os.path.dirname(__file__), "..", "tests", "data")

# A block's canonical parameters: (name, shape); weights [out, in].
BLOCK = [("ln_1.weight", [C]), ("ln_1.bias", [C]),
         ("attn.q.weight", [C, C]), ("attn.q.bias", [C]),
         ("attn.k.weight", [C, C]), ("attn.k.bias", [C]),
         ("attn.v.weight", [C, C]), ("attn.v.bias", [C]),
         ("attn.c_proj.weight", [C, C]), ("attn.c_proj.bias", [C]),
         ("ln_2.weight", [C]), ("ln_2.bias", [C]),
         ("mlp.c_fc.weight", [4 * C, C]), ("mlp.c_fc.bias", [4 * C]),
         ("mlp.c_proj.weight", [C, 4 * C]), ("mlp.c_proj.bias", [C])]

# llm.c's stacked arrays after wte and wpe: the block parts one layer's slice holds.
LLMC_ARRAYS = [["ln_1.weight"], ["ln_1.bias"],
               ["attn.q.weight", "attn.k.weight", "attn.v.weight"],
               ["attn.q.bias", "attn.k.bias", "attn.v.bias"],
               ["attn.c_proj.weight"], ["attn.c_proj.bias"], ["ln_2.weight"], ["ln_2.bias"],
               ["mlp.c_fc.weight"], ["mlp.c_fc.bias"], ["mlp.c_proj.weight"],
               ["mlp.c_proj.bias"]]


def bf16_exact(x):
    """x with its float32 bits' low half cleared: a value bfloat16 holds exactly."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0] & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def canonical_weights(rng):
    """{canonical name: (shape, row-major values)} in mpitron's parameter order."""
    layout = [("transformer.wte.weight", [VP, C]), ("transformer.wpe.weight", [MAX_T, C])]
    for i in range(L):
        layout += [("transformer.h.%d.%s" % (i, name), shape) for name, shape in BLOCK]
    layout += [("transformer.ln_f.weight", [C]), ("transformer.ln_f.bias", [C])]
    weights = {}
    for name, shape in layout:
        values = [bf16_exact(rng.gauss(0.0, 0.5)) for _ in range(math.prod(shape))]
        if name == "transformer.wte.weight":
            values[V * C:] = [0.0] * ((VP - V) * C)
        weights[name] = (shape, values)
    return weights


def transpose(shape, values):
    rows, cols = shape
    return [cols, rows], [values[r * cols + c] for c in range(cols) for r in range(rows)]


def llmc_values(weights):
    """Every value in the order of llm.c's file."""
    out = weights["transformer.wte.weight"][1] + weights["transformer.wpe.weight"][1]
    for parts in LLMC_ARRAYS:
        for i in range(L):
            for part in parts:
                out += weights["transformer.h.%d.%s" % (i, part)][1]
    return out + weights["transformer.ln_f.weight"][1] + weights["transformer.ln_f.bias"][1]


def write_llmc(path, weights, version):
    header = struct.pack("<256i", 20240326, version, MAX_T, V, L, NH, C, VP, *([0] * 248))
    values = llmc_values(weights)
    if version == 3:
        data = struct.pack("<%df" % len(values), *values)
    else:
        data = b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:]
                        for v in values)
    with open(path, "wb") as f:
        f.write(header + data)


def write_safetensors(path, tensors):
    """tensors: [(name, shape, values)] as F32, in this order; header as json.dumps writes it."""
    header, data = {}, b""
    for name, shape, values in tensors:
        chunk = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": shape,
                        "data_offsets": [len(data), len(data) + len(chunk)]}
        data += chunk
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def hf_tensors(weights):
    """Hugging Face's GPT-2 state dict, names sorted as its model.safetensors has them."""
    w = weights
    out = {"wte.weight": ([V, C], w["transformer.wte.weight"][1][:V * C]),
           "wpe.weight": w["transformer.wpe.weight"],
           "ln_f.weight": w["transformer.ln_f.weight"], "ln_f.bias": w["transformer.ln_f.bias"]}
    mask = [1.0 if c <= r else 0.0 for r in range(MAX_T) for c in range(MAX_T)]
    for i in range(L):
        h = "transformer.h.%d." % i
        for name in ["ln_1.weight", "ln_1.bias", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                     "mlp.c_fc.bias", "mlp.c_proj.bias"]:
            out["h.%d.%s" % (i, name)] = w[h + name]
        for kind in ["weight", "bias"]:
            parts = [w[h + "attn.%s.%s" % (x, kind)] for x in "qkv"]
            stacked = sum((values for _, values in parts), [])
            shape = [3 * C, C] if kind == "weight" else [3 * C]
            out["h.%d.attn.c_attn.%s" % (i, kind)] = (shape, stacked)
        for name in ["attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
                     "mlp.c_proj.weight"]:
            key = "h.%d.%s" % (i, name)
            out[key] = transpose(*(out[key] if name == "attn.c_attn.weight" else w[h + name]))
        out["h.%d.attn.bias" % i] = ([1, 1, MAX_T, MAX_T], mask)
    return [(name, shape, values) for name, (shape, values) in sorted(out.items())]


def main():
    weights = canonical_weights(random.Random(20240326))
    write_llmc(os.path.join(DATA, "llmc_sample_f32.bin"), weights, 3)
    write_llmc(os.path.join(DATA, "llmc_sample_bf16.bin"), weights, 5)
    write_safetensors(os.path.join(DATA, "llmc_sample_expected.safetensors"),
                      [(name, shape, values) for name, (shape, values) in weights.items()])
    write_safetensors(os.path.join(DATA, "hf_gpt2_sample.safetensors"), hf_tensors(weights))


if __name__ == "__main__":
    main()
