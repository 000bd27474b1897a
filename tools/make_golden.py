#!/usr/bin/python3
"""Writes the PyTorch golden values that tests/autograd/test_torch_parity.cpp compares against.

Run with Debian's interpreter (python3-torch): /usr/bin/python3 tools/make_golden.py
Every value is computed in float64. Inputs come from torch's own seeded generator and are written
next to the expected outputs, so the C++ test never has to reproduce torch's random stream.

File format (one file per topic under tests/data/):
    {"<name>": {"shape": [d0, d1, ...], "data": [row-major float64 values]}, ...}
A scalar has shape []. Python's json writes floats with repr(), the shortest string that parses
back to the same float64, so the values round-trip exactly.
"""

import json
import math
import pathlib

import torch
import torch.nn.functional as F

DATA_DIR = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data"
SEED = 20240229
DTYPE = torch.float64


def entry(tensor):
    t = tensor.detach().to(DTYPE).contiguous()
    return {"shape": list(t.shape), "data": [float(v) for v in t.reshape(-1).tolist()]}


def write(name, tensors):
    path = DATA_DIR / name
    body = {key: entry(value) for key, value in tensors.items()}
    for key, value in body.items():
        assert all(math.isfinite(v) for v in value["data"]), f"{name}: {key} is not finite"
    lines = [f" {json.dumps(key)}: {json.dumps(value)}" for key, value in body.items()]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    print(f"wrote {path} ({len(body)} tensors)")


def model_goldens(loss_of, initial, tokens, targets):
    """The golden entries of one model's loss and gradients: "param.<name>" for every initial
    parameter, "tokens", "targets", the loss_of(parameters, tokens, targets) "loss" and
    "grad.<name>" for every parameter (make_golden_gpt.py, make_golden_llama_model.py)."""
    leaves = {n: t.clone().requires_grad_(True) for n, t in initial.items()}
    loss = loss_of(leaves, tokens, targets)
    loss.backward()
    out = {f"param.{n}": t for n, t in initial.items()}
    out.update({"tokens": tokens, "targets": targets, "loss": loss})
    out.update({f"grad.{n}": t.grad for n, t in leaves.items()})
    return out


def grad_of(fn, x, upstream):
    """(fn(x), d<fn(x), upstream>/dx) for a fresh leaf copy of x."""
    leaf = x.clone().requires_grad_(True)
    y = fn(leaf)
    (dx,) = torch.autograd.grad(y, leaf, upstream)
    return y, dx


def gelu_goldens():
    x = torch.tensor([-5.0, -2.0, -1.0, 0.0, 1.0, 2.0, 5.0], dtype=DTYPE)
    out = {"x": x}
    for form in ("none", "tanh"):
        key = "exact" if form == "none" else "tanh"
        # Upstream gradient 1 makes dx the derivative gelu'(x).
        y, dydx = grad_of(lambda t: F.gelu(t, approximate=form), x, torch.ones_like(x))
        out[f"{key}.y"] = y
        out[f"{key}.dydx"] = dydx
    write("gelu.json", out)


def softmax_goldens():
    cases = {
        "wide": torch.tensor([[151.29, 0.0, -151.29]], dtype=DTYPE),
        "equal_large": torch.tensor([[1000.0, 1000.0], [-1000.0, -1000.0]], dtype=DTYPE),
        "mixed": torch.tensor([[1.0, 2.0, 3.0, 4.0], [-0.5, 0.25, 80.0, -80.0]], dtype=DTYPE),
    }
    out = {}
    for name, x in cases.items():
        # A fixed, non-constant upstream gradient (a constant one has a zero softmax gradient).
        dy = torch.linspace(-1.0, 2.0, x.numel(), dtype=DTYPE).reshape(x.shape)
        y, dx = grad_of(lambda t: F.softmax(t, dim=-1), x, dy)
        out.update({f"{name}.x": x, f"{name}.dy": dy, f"{name}.y": y, f"{name}.dx": dx})
    write("softmax.json", out)


def mse_goldens(gen):
    pred = torch.randn(4, 5, generator=gen, dtype=DTYPE)
    target = torch.randn(4, 5, generator=gen, dtype=DTYPE)
    loss, dpred = grad_of(lambda t: F.mse_loss(t, target), pred, torch.tensor(1.0, dtype=DTYPE))
    write("mse.json", {"pred": pred, "target": target, "loss": loss, "dpred": dpred})


def mlp_goldens(gen):
    """out = linear(gelu(linear(x, w1, b1)), w2, b2); loss = mse(out, target). 32 -> 64 -> 32."""
    hidden, inner = 32, 64

    def init(*shape, fan_in):  # nn.Linear's default range, U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        bound = 1.0 / math.sqrt(fan_in)
        return (torch.rand(*shape, generator=gen, dtype=DTYPE) * 2.0 - 1.0) * bound

    inputs = {
        "x": torch.randn(2, 4, hidden, generator=gen, dtype=DTYPE),
        "w1": init(inner, hidden, fan_in=hidden),
        "b1": init(inner, fan_in=hidden),
        "w2": init(hidden, inner, fan_in=inner),
        "b2": init(hidden, fan_in=inner),
        "target": torch.randn(2, 4, hidden, generator=gen, dtype=DTYPE),
    }
    leaves = {k: v.clone().requires_grad_(k != "target") for k, v in inputs.items()}
    h = F.gelu(F.linear(leaves["x"], leaves["w1"], leaves["b1"]))
    out = F.linear(h, leaves["w2"], leaves["b2"])
    loss = F.mse_loss(out, leaves["target"])
    loss.backward()
    goldens = dict(inputs)
    goldens.update({"out": out, "loss": loss})
    goldens.update({f"d{k}": leaves[k].grad for k in ("x", "w1", "b1", "w2", "b2")})
    write("mlp.json", goldens)


def main():
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(SEED)
    gelu_goldens()
    softmax_goldens()
    mse_goldens(gen)
    mlp_goldens(gen)


if __name__ == "__main__":
    main()
