#!/usr/bin/python3
"""Writes the PyTorch golden values of the transformer's building blocks (float64, torch's seeded inputs).

Run with Debian's interpreter (python3-torch): /usr/bin/python3 tools/make_golden_transformer.py
Format as tools/make_golden.py (targets are stored as float64 integers).
- tests/data/layer_norm.json: F.layer_norm over the last dim of x [3, 4, 10] (eps 1e-5) with
  weight and bias; y and the gradients dx, dweight, dbias for a fixed upstream gradient dy.
- tests/data/cross_entropy.json: F.cross_entropy (mean) of logits [6, 11] whose row 1 is all
  equal and rows 2 and 3 have magnitude 1e4; loss and dlogits.
- tests/data/causal_attention.json: causal multi-head self-attention (embed 16, 4 heads,
  x [2, 8, 16]); output and the gradients of x and every projection for a fixed dy.
"""

import math

import torch
import torch.nn.functional as F

from make_golden import DTYPE, write

SEED = 20261201


def layer_norm_goldens(gen):
    x = torch.randn(3, 4, 10, generator=gen, dtype=DTYPE) * 2.0 + 3.0
    weight = torch.randn(10, generator=gen, dtype=DTYPE)
    bias = torch.randn(10, generator=gen, dtype=DTYPE)
    dy = torch.randn(3, 4, 10, generator=gen, dtype=DTYPE)
    leaves = [t.clone().requires_grad_(True) for t in (x, weight, bias)]
    y = F.layer_norm(leaves[0], (10,), leaves[1], leaves[2], eps=1e-5)
    y.backward(dy)
    write("layer_norm.json", {"x": x, "weight": weight, "bias": bias, "dy": dy, "y": y,
                              "dx": leaves[0].grad, "dweight": leaves[1].grad,
                              "dbias": leaves[2].grad})


def cross_entropy_goldens(gen):
    logits = torch.randn(6, 11, generator=gen, dtype=DTYPE) * 3.0
    logits[1] = 2.5
    logits[2] = (torch.rand(11, generator=gen, dtype=DTYPE) * 2.0 - 1.0) * 1e4
    logits[3] = 1e4 + torch.rand(11, generator=gen, dtype=DTYPE) * 4.0
    targets = torch.tensor([0, 10, 5, 3, 7, 10])
    leaf = logits.clone().requires_grad_(True)
    loss = F.cross_entropy(leaf, targets)
    loss.backward()
    write("cross_entropy.json", {"logits": logits, "targets": targets, "loss": loss,
                                 "dlogits": leaf.grad})


def causal_attention_goldens(gen):
    embed, heads, batch, seq = 16, 4, 2, 8
    d = embed // heads
    w = {}
    for name in ("q", "k", "v", "out"):
        w[f"{name}.weight"] = torch.randn(embed, embed, generator=gen, dtype=DTYPE) / math.sqrt(embed)
        w[f"{name}.bias"] = torch.randn(embed, generator=gen, dtype=DTYPE) * 0.1
    x = torch.randn(batch, seq, embed, generator=gen, dtype=DTYPE)
    dy = torch.randn(batch, seq, embed, generator=gen, dtype=DTYPE)
    leaves = {k: v.clone().requires_grad_(True) for k, v in w.items()}
    xl = x.clone().requires_grad_(True)

    def project(name):
        y = F.linear(xl, leaves[f"{name}.weight"], leaves[f"{name}.bias"])
        return y.view(batch, seq, heads, d).transpose(1, 2)

    scores = torch.matmul(project("q"), project("k").transpose(-2, -1)) / math.sqrt(d)
    mask = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    probs = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    context = torch.matmul(probs, project("v")).transpose(1, 2).reshape(batch, seq, embed)
    out = F.linear(context, leaves["out.weight"], leaves["out.bias"])
    out.backward(dy)
    goldens = {"x": x, "dy": dy, "out": out, "dx": xl.grad}
    goldens.update(w)
    goldens.update({f"d{k}": v.grad for k, v in leaves.items()})
    write("causal_attention.json", goldens)


def main():
    gen = torch.Generator().manual_seed(SEED)
    layer_norm_goldens(gen)
    cross_entropy_goldens(gen)
    causal_attention_goldens(gen)


if __name__ == "__main__":
    main()
