#!/usr/bin/python3
"""Goldens for the GPT export (src/nn/models/gpt_names.h): a tiny GPT (2 layers, hidden 8, 2 heads,
context 16, vocabulary 256) under mpitron's parameter names, and the nanoGPT state dict that the
PyTorch peer's GPT class accepts for it.

Writes, with struct + json only (no safetensors package):
  tests/data/gpt_mpitron_names.safetensors  the input: mpitron names (attn.q/k/v separate),
                                            values 0.5 sin(0.37 j + k) (k-th tensor, j-th element)
                                            or 1 + that / 5 for LayerNorm weights, as float32;
  tests/data/gpt_export_expected.safetensors  model.state_dict() of the peer's GPT after
                                            load_state_dict(strict=True) of the nanoGPT-named
                                            dictionary (c_attn = q, k, v stacked along dim 0):
                                            strict loading fails on any missing, unexpected or
                                            misshapen name, so this file exists only if it loaded;
  tests/data/gpt_export_golden.json         that state dict's names and shapes in order, and the
                                            peer's mean cross-entropy over the non-overlapping
                                            16-byte windows of a fixed text (windows_loss).
tests/nn/test_gpt_names.cpp exports the first file and compares with the second exactly.

    /usr/bin/python3 tools/make_gpt_export_golden.py   # the peer: tools/torch_peer_gpt.py or --peer
"""
import argparse
import importlib.util
import json
import os
import struct

import numpy as np
import torch

LAYERS, C, HEADS, BLOCK, VOCAB = 2, 8, 2, 16, 256
TEXT = b"mpitron writes checkpoints that PyTorch can load; this text is the eval golden."
TOOLS = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(TOOLS, "..", "tests", "data")


def mpitron_shapes():
    shapes = [("transformer.wte.weight", [VOCAB, C]), ("transformer.wpe.weight", [BLOCK, C])]
    for i in range(LAYERS):
        h = f"transformer.h.{i}."
        shapes += [(h + "ln_1.weight", [C]), (h + "ln_1.bias", [C])]
        for which in "qkv":
            shapes += [(h + f"attn.{which}.weight", [C, C]), (h + f"attn.{which}.bias", [C])]
        shapes += [(h + "attn.c_proj.weight", [C, C]), (h + "attn.c_proj.bias", [C]),
                   (h + "ln_2.weight", [C]), (h + "ln_2.bias", [C]),
                   (h + "mlp.c_fc.weight", [4 * C, C]), (h + "mlp.c_fc.bias", [4 * C]),
                   (h + "mlp.c_proj.weight", [C, 4 * C]), (h + "mlp.c_proj.bias", [C])]
    return shapes + [("transformer.ln_f.weight", [C]), ("transformer.ln_f.bias", [C])]


def mpitron_tensors():
    tensors = {}
    for k, (name, shape) in enumerate(mpitron_shapes()):
        values = 0.5 * np.sin(0.37 * np.arange(int(np.prod(shape))) + k)
        if ".ln_" in name and name.endswith("weight"):
            values = 1 + values / 5
        tensors[name] = torch.from_numpy(values.astype(np.float32).reshape(shape))
    return tensors


def write_safetensors(path, tensors):
    """The safetensors layout of src/nn/checkpoint/safetensors.h, tensors in dictionary order."""
    header, data = {}, b""
    for name, t in tensors.items():
        chunk = t.detach().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [len(data), len(data) + len(chunk)]}
        data += chunk
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def nanogpt_names(tensors):
    """The mapping under test, written independently of the C++ one."""
    out = {}
    for name, t in tensors.items():
        for which in "qkv":
            if f".attn.{which}." in name:
                break
        else:
            out[name] = t
            continue
        if which == "q":
            part = name.rsplit(".", 1)[1]
            stem = name[:name.index(".attn.")]
            stacked = [tensors[f"{stem}.attn.{w}.{part}"] for w in "qkv"]
            out[f"{stem}.attn.c_attn.{part}"] = torch.cat(stacked, 0)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--peer", default=os.path.join(TOOLS, "torch_peer_gpt.py"),
                   help="path of torch_peer_gpt.py")
    args = p.parse_args()
    spec = importlib.util.spec_from_file_location("torch_peer_gpt", args.peer)
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)

    tensors = mpitron_tensors()
    write_safetensors(os.path.join(DATA, "gpt_mpitron_names.safetensors"), tensors)
    model = peer.GPT(LAYERS, C, HEADS, BLOCK)
    model.load_state_dict(nanogpt_names(tensors), strict=True)
    state = model.state_dict()
    write_safetensors(os.path.join(DATA, "gpt_export_expected.safetensors"), state)
    data = np.frombuffer(TEXT, dtype=np.uint8).astype(np.int64)
    golden = {"layers": LAYERS, "hidden": C, "heads": HEADS, "block": BLOCK, "seq": BLOCK,
              "text": TEXT.decode(), "loss": peer.windows_loss(model, data, BLOCK),
              "names": list(state.keys()), "shapes": [list(t.shape) for t in state.values()]}
    with open(os.path.join(DATA, "gpt_export_golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
