#!/usr/bin/python3
"""Writes the PyTorch golden values of a small Llama: its loss and every gradient.

Run with Debian's interpreter (python3-torch): /usr/bin/python3 tools/make_golden_llama_model.py
Format as tools/make_golden.py. The model is Hugging Face Llama's (modeling_llama.py) written
out here in plain torch ops and computed in float64, without importing transformers:
RMSNorm (eps 1e-5), grouped-query attention (4 heads, 2 key/value heads, each repeated for two
query heads as repeat_kv does) with rotary embeddings (theta 10000, rotate_half) on q and k, a
SwiGLU MLP (silu(gate) * up, then down), no biases, and a separate (untied) LM head.
Parameters carry mpitron's names (src/nn/models/block_parameters.h: ln_1, attn.q/k/v,
attn.c_proj, ln_2, mlp.gate/up, mlp.c_proj; transformer.wte, transformer.ln_f, lm_head).
- tests/data/llama.json: 2 blocks, hidden 32, ffn 48, seq 16, vocab 256, batch 4, every
  parameter random (norm weights 1 + N(0, 0.1^2)): "param.<name>", "tokens", "targets", the mean
  cross-entropy "loss" and "grad.<name>" for every parameter.
"""

import math

import torch
import torch.nn.functional as F

from make_golden import DTYPE, model_goldens, write
from make_golden_llama import causal_gqa

SEED = 20261206
LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, SEQ, VOCAB, BATCH = 2, 32, 4, 2, 48, 16, 256, 4
THETA, EPS = 10000.0, 1e-5


def parameter_shapes():
    h, kv = HIDDEN, KV_HEADS * HIDDEN // HEADS
    shapes = {"transformer.wte.weight": (VOCAB, h)}
    for i in range(LAYERS):
        p = f"transformer.h.{i}."
        shapes.update({p + "ln_1.weight": (h,), p + "attn.q.weight": (h, h),
                       p + "attn.k.weight": (kv, h), p + "attn.v.weight": (kv, h),
                       p + "attn.c_proj.weight": (h, h), p + "ln_2.weight": (h,),
                       p + "mlp.gate.weight": (FFN, h), p + "mlp.up.weight": (FFN, h),
                       p + "mlp.c_proj.weight": (h, FFN)})
    shapes.update({"transformer.ln_f.weight": (h,), "lm_head.weight": (VOCAB, h)})
    return shapes


def initial_parameters(gen):
    params = {}
    for name, shape in parameter_shapes().items():
        noise = torch.randn(shape, generator=gen, dtype=DTYPE)
        params[name] = 1.0 + 0.1 * noise if len(shape) == 1 else noise / math.sqrt(shape[1])
    return params


def rms_norm(x, weight):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))


def loss_of(p, tokens, targets):
    x = p["transformer.wte.weight"][tokens]
    for i in range(LAYERS):
        h = f"transformer.h.{i}."
        a = rms_norm(x, p[h + "ln_1.weight"])
        y = causal_gqa(a, p[h + "attn.q.weight"], p[h + "attn.k.weight"], p[h + "attn.v.weight"],
                       HEADS, KV_HEADS, THETA)
        x = x + y @ p[h + "attn.c_proj.weight"].t()
        m = rms_norm(x, p[h + "ln_2.weight"])
        gated = F.silu(m @ p[h + "mlp.gate.weight"].t()) * (m @ p[h + "mlp.up.weight"].t())
        x = x + gated @ p[h + "mlp.c_proj.weight"].t()
    logits = rms_norm(x, p["transformer.ln_f.weight"]) @ p["lm_head.weight"].t()
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def main():
    gen = torch.Generator().manual_seed(SEED)
    initial = initial_parameters(gen)
    windows = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)
    tokens, targets = windows[:, :SEQ], windows[:, 1:]
    write("llama.json", model_goldens(loss_of, initial, tokens, targets))


if __name__ == "__main__":
    main()
