#!/usr/bin/python3
"""Writes the PyTorch golden values of multi-head attention and data-parallel SGD.

Run with Debian's interpreter (python3-torch): /usr/bin/python3 tools/make_golden_attention_dp.py
Every value is computed in float64; inputs come from torch's seeded generator and are written
next to the expected outputs, so the C++ tests never reproduce torch's random stream.

Files (written by tools/make_golden.py's `write`: {"<name>": {"shape": [...], "data": [...]}}):
- tests/data/attention.json: the reference program's MultiHeadAttentionTP on one rank (embed 64,
  4 heads, input [2, 8, 64]) with seeded normal weights (forward, and every gradient for a fixed
  upstream gradient dy) and with the deterministic arange weights (forward).
- tests/data/train_dp.json: five SGD steps of Linear(10 -> 1) with MSE loss on consecutive
  batches of 8 rows of a fixed 40-sample dataset, without and with momentum 0.9: loss per step
  and final parameters. A data-parallel run whose replicas' batches make up these batches must
  reproduce them.
"""

import math

import torch
import torch.nn.functional as F

from make_golden import DTYPE, write

SEED = 20240505

EMBED, HEADS, BATCH, SEQ = 64, 4, 2, 8
ARANGE_OFFSETS = {"q": 0.1, "k": -0.2, "v": 0.3, "out": -0.4}

SAMPLES, FEATURES, TARGETS, STEP_BATCH, STEPS, LR = 40, 10, 1, 8, 5, 0.01


def f64(value):
    """A Python number or list as a float64 tensor (not rounded through float32 first)."""
    return torch.as_tensor(value, dtype=DTYPE)


def attention(x, w):
    """The reference program's forward on one rank: projections, per-head softmax(q k^T / sqrt(d)) v,
    heads concatenated, output projection. w maps "q.weight", "q.bias", ... to tensors."""
    b, s, e = x.shape
    d = e // HEADS

    def heads(name):
        y = F.linear(x, w[f"{name}.weight"], w[f"{name}.bias"])
        return y.view(b, s, HEADS, d).transpose(1, 2)

    scores = torch.matmul(heads("q"), heads("k").transpose(-2, -1)) * d**-0.5
    context = torch.matmul(F.softmax(scores, dim=-1), heads("v"))
    context = context.transpose(1, 2).contiguous().view(b, s, e)
    return F.linear(context, w["out.weight"], w["out.bias"])


def arange_weights():
    w = {}
    for name, offset in ARANGE_OFFSETS.items():
        w[f"{name}.weight"] = torch.arange(EMBED * EMBED, dtype=DTYPE).reshape(EMBED, EMBED) + offset
        w[f"{name}.bias"] = torch.arange(EMBED, dtype=DTYPE) + offset
    return w


def attention_goldens(gen):
    x = torch.randn(BATCH, SEQ, EMBED, generator=gen, dtype=DTYPE)
    w = {}
    for name in ARANGE_OFFSETS:
        w[f"{name}.weight"] = torch.randn(EMBED, EMBED, generator=gen, dtype=DTYPE) / math.sqrt(EMBED)
        w[f"{name}.bias"] = 0.1 * torch.randn(EMBED, generator=gen, dtype=DTYPE)
    dy = torch.randn(BATCH, SEQ, EMBED, generator=gen, dtype=DTYPE)

    leaves = {key: value.clone().requires_grad_(True) for key, value in w.items()}
    x_leaf = x.clone().requires_grad_(True)
    out = attention(x_leaf, leaves)
    out.backward(dy)

    # Independent cross-check of the formula: torch's own multi-head attention.
    batch_first = x.transpose(0, 1)
    in_proj_bias = torch.cat([w["q.bias"], w["k.bias"], w["v.bias"]])
    reference, _ = F.multi_head_attention_forward(
        batch_first, batch_first, batch_first, EMBED, HEADS, None, in_proj_bias, None, None,
        False, 0.0, w["out.weight"], w["out.bias"], training=False, need_weights=False,
        use_separate_proj_weight=True, q_proj_weight=w["q.weight"], k_proj_weight=w["k.weight"],
        v_proj_weight=w["v.weight"])
    assert torch.allclose(out, reference.transpose(0, 1), rtol=1e-12, atol=1e-12)

    golden = {"x": x, "dy": dy}
    golden.update({f"normal.{key}": value for key, value in w.items()})
    golden["normal.out"] = out
    golden["normal.dx"] = x_leaf.grad
    golden.update({f"normal.d{key}": leaf.grad for key, leaf in leaves.items()})
    golden["arange.out"] = attention(x, arange_weights())
    write("attention.json", golden)


def train_dp_goldens(gen):
    x = torch.randn(SAMPLES, FEATURES, generator=gen, dtype=DTYPE)
    y = torch.randn(SAMPLES, TARGETS, generator=gen, dtype=DTYPE)
    bound = 1.0 / math.sqrt(FEATURES)
    weight = (torch.rand(TARGETS, FEATURES, generator=gen, dtype=DTYPE) * 2 - 1) * bound
    bias = (torch.rand(TARGETS, generator=gen, dtype=DTYPE) * 2 - 1) * bound
    golden = {"x": x, "y": y, "weight": weight, "bias": bias,
              "lr": f64(LR), "batch": f64(STEP_BATCH)}
    for name, momentum in (("plain", 0.0), ("momentum", 0.9)):
        model = torch.nn.Linear(FEATURES, TARGETS).to(DTYPE)
        with torch.no_grad():
            model.weight.copy_(weight)
            model.bias.copy_(bias)
        optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=momentum)
        losses = []
        for step in range(STEPS):
            rows = slice(step * STEP_BATCH, (step + 1) * STEP_BATCH)
            optimizer.zero_grad()
            loss = F.mse_loss(model(x[rows]), y[rows])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        golden[f"{name}.momentum"] = f64(momentum)
        golden[f"{name}.losses"] = f64(losses)
        golden[f"{name}.weight"] = model.weight
        golden[f"{name}.bias"] = model.bias
    write("train_dp.json", golden)


def main():
    gen = torch.Generator().manual_seed(SEED)
    attention_goldens(gen)
    train_dp_goldens(gen)


if __name__ == "__main__":
    main()
