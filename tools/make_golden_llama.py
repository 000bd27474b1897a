#!/usr/bin/python3
"""Writes the PyTorch golden values of the Llama family's ops (float64, torch's seeded inputs).

Run with Debian's interpreter (python3-torch): /usr/bin/python3 tools/make_golden_llama.py
Format as tools/make_golden.py. Each formula is Hugging Face Llama's (modeling_llama.py) written
out here as math, without importing transformers; torch's autograd gives the gradients.
- tests/data/rms_norm.json: LlamaRMSNorm, x * rsqrt(mean(x^2) + eps) * weight over the last
  dim of x [3, 4, 10] (eps 1e-5; row 0 of batch 0 in [-2e-3, 2e-3], below eps); y and the
  gradients dx, dweight for a fixed upstream gradient dy.
- tests/data/rotary.json: apply_rotary_pos_emb with rotate_half on q [2, 6, 3, 8] (theta 10000,
  positions from 0) and on k [1, 4, 2, 16] (theta 500000, positions from 4090, a generation
  step); x laid out [batch, seq, heads, head_dim] as mpitron rotates it (HF's
  unsqueeze_dim = 2); y and dx for a fixed dy.
- tests/data/swiglu.json: LlamaMLP's act_fn(gate) * up with act_fn = silu, gate [4, 12] spread
  over [-12, 12] plus the tails +-40; y and the gradients dgate, dup for a fixed dy.
- tests/data/rotary_llama3.json: the same rotation with Llama 3's rope_scaling of type "llama3"
  (Llama 3.2's: theta 500000, factor 32, low_freq_factor 1, high_freq_factor 4, original
  context 8192; the formula of transformers' _compute_llama3_parameters) on x [1, 3, 2, 64] at
  positions from 1021 ("near") and from 100000 ("far"); y and dx for a fixed dy.
"""

import math


import torch
import torch.nn.functional as F

from make_golden import DTYPE, write

SEED = 20261205
RMS_EPS = 1e-5


def rms_norm_goldens(gen):
    x = torch.randn(3, 4, 10, generator=gen, dtype=DTYPE) * 1.5
    x[0, 0] = (torch.rand(10, generator=gen, dtype=DTYPE) * 2.0 - 1.0) * 2e-3
    weight = torch.randn(10, generator=gen, dtype=DTYPE)
    dy = torch.randn(3, 4, 10, generator=gen, dtype=DTYPE)
    xl, wl = x.clone().requires_grad_(True), weight.clone().requires_grad_(True)
    variance = xl.pow(2).mean(-1, keepdim=True)
    y = wl * (xl * torch.rsqrt(variance + RMS_EPS))
    y.backward(dy)
    write("rms_norm.json", {"x": x, "weight": weight, "dy": dy, "y": y, "dx": xl.grad,
                            "dweight": wl.grad})


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


LLAMA_3_2_SCALING = {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192}


def inverse_frequencies(theta, head_dim, scaling=None):
    """RoPE's inverse frequency of each pair; with `scaling` (a config.json rope_scaling of
    rope_type "llama3"), Llama 3's: kept above the high-frequency band, divided by factor below
    the low-frequency one, blended between."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=DTYPE) / head_dim))
    if scaling is None:
        return inv_freq
    factor, low, high = (scaling["factor"], scaling["low_freq_factor"],
                         scaling["high_freq_factor"])
    original = scaling["original_max_position_embeddings"]
    wavelength = 2 * math.pi / inv_freq
    scaled = torch.where(wavelength > original / low, inv_freq / factor, inv_freq)
    smooth = (original / wavelength - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelength >= original / high) & (wavelength <= original / low)
    return torch.where(medium, smoothed, scaled)


def rotary(x, theta, offset, scaling=None):
    """HF Llama's rotary embedding of x [batch, seq, heads, head_dim] at positions offset + s."""
    head_dim, seq = x.shape[-1], x.shape[1]
    inv_freq = inverse_frequencies(theta, head_dim, scaling)
    positions = torch.arange(offset, offset + seq, dtype=DTYPE)
    freqs = torch.outer(positions, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
    return x * cos + rotate_half(x) * sin


def causal_gqa(a, wq, wk, wv, heads, kv_heads, theta, scaling=None):
    """LlamaAttention before o_proj: a [batch, seq, c] projected by wq, wk, wv ([out, in]), RoPE
    on q and k, each key/value head repeated for its heads // kv_heads query heads (repeat_kv),
    causal softmax(q k^T / sqrt(head_dim)) v; returns [batch, seq, c]."""
    b, t, c = a.shape
    d = c // heads
    q = rotary((a @ wq.t()).view(b, t, heads, d), theta, 0, scaling)
    k = rotary((a @ wk.t()).view(b, t, kv_heads, d), theta, 0, scaling)
    v = (a @ wv.t()).view(b, t, kv_heads, d)
    k = k.repeat_interleave(heads // kv_heads, dim=2)
    v = v.repeat_interleave(heads // kv_heads, dim=2)
    q, k, v = (z.transpose(1, 2) for z in (q, k, v))
    att = (q @ k.transpose(-2, -1)) / math.sqrt(d)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
    return (att @ v).transpose(1, 2).reshape(b, t, c)


def rotary_goldens(gen):
    out = {}
    for name, shape, theta, offset in (("q", (2, 6, 3, 8), 10000.0, 0),
                                       ("k", (1, 4, 2, 16), 500000.0, 4090)):
        x = torch.randn(*shape, generator=gen, dtype=DTYPE)
        dy = torch.randn(*shape, generator=gen, dtype=DTYPE)
        leaf = x.clone().requires_grad_(True)
        y = rotary(leaf, theta, offset)
        y.backward(dy)
        out.update({f"{name}.x": x, f"{name}.dy": dy, f"{name}.y": y, f"{name}.dx": leaf.grad,
                    f"{name}.theta": torch.tensor(theta, dtype=DTYPE),
                    f"{name}.offset": torch.tensor(float(offset), dtype=DTYPE)})
    write("rotary.json", out)


def rotary_llama3_goldens(gen):
    out = {}
    for name, offset in (("near", 1021), ("far", 100000)):
        x = torch.randn(1, 3, 2, 64, generator=gen, dtype=DTYPE)
        dy = torch.randn(1, 3, 2, 64, generator=gen, dtype=DTYPE)
        leaf = x.clone().requires_grad_(True)
        y = rotary(leaf, 500000.0, offset, LLAMA_3_2_SCALING)
        y.backward(dy)
        out.update({f"{name}.x": x, f"{name}.dy": dy, f"{name}.y": y, f"{name}.dx": leaf.grad,
                    f"{name}.offset": torch.tensor(float(offset), dtype=DTYPE)})
    write("rotary_llama3.json", out)


def swiglu_goldens(gen):
    gate = (torch.rand(4, 12, generator=gen, dtype=DTYPE) * 2.0 - 1.0) * 12.0
    gate[3, :2] = torch.tensor([-40.0, 40.0], dtype=DTYPE)
    up = torch.randn(4, 12, generator=gen, dtype=DTYPE)
    dy = torch.randn(4, 12, generator=gen, dtype=DTYPE)
    gl, ul = gate.clone().requires_grad_(True), up.clone().requires_grad_(True)
    y = F.silu(gl) * ul
    y.backward(dy)
    write("swiglu.json", {"gate": gate, "up": up, "dy": dy, "y": y, "dgate": gl.grad,
                          "dup": ul.grad})


def main():
    gen = torch.Generator().manual_seed(SEED)
    rms_norm_goldens(gen)
    rotary_goldens(gen)
    swiglu_goldens(gen)
    rotary_llama3_goldens(gen)


if __name__ == "__main__":
    main()
