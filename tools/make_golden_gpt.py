#!/usr/bin/python3
"""Writes the PyTorch golden values of the GPT: its forward and gradients, and training steps.

Run with Debian's interpreter (python3-torch): /usr/bin/python3 tools/make_golden_gpt.py
The model is the GPT-2 layout of src/nn/models/gpt_config.h (the same as tools/torch_peer_gpt.py),
written here in plain torch ops and computed in float64. Parameters use mpitron's names (q, k
and v kept apart); inputs come from torch's seeded generator and are stored with the outputs.

Files (tools/make_golden.py's format):
- tests/data/gpt.json: a 2-block GPT (hidden 32, 4 heads, seq 16, vocab 256, batch 4) with
  every parameter non-trivial (biases and LayerNorms random too): "param.<name>", "tokens",
  "targets", the mean cross-entropy "loss" and "grad.<name>" for every parameter.
- tests/data/gpt_train.json: five AdamW steps (betas 0.9/0.95, eps 1e-8, weight decay 0.1 on
  tensors of two or more dims, lr 1e-2 with 2 warmup steps then cosine to 1e-3 at step 5,
  global-norm clipping at 1.0) from gpt.json's parameters, step k on "tokens.<k>"/"targets.<k>"
  (k = 1..5): "loss.<k>", "grad_norm.<k>" and the final "final.<name>". Every step's norm
  (1.45-2.46) is above 1.0, so clipping scales every step.
- tests/data/gpt_train_clip_inactive.json: the same five steps on the same batches with
  clipping at 10.0, above every step's norm, so that it must leave every gradient as it is.
- tests/data/gpt_train_bf16.json: gpt_train.json's five steps in float32 with `train --bf16`'s
  linear layers (Bf16Linear: bfloat16 operands, float32 sums) and parameters: the forward reads
  every parameter rounded to bfloat16 (Bf16Read), whose gradient the float32 master weights
  take, which AdamW updates with float32 moments; "final.<name>" are the masters. The tied head
  writes bfloat16 logits, and their gradient is bfloat16 (bf16_head); the MLP's first layer
  rounds its product to bfloat16 before its bias (bf16_fc1); attention reads q, k and v rounded
  to bfloat16, their gradients float32 (Bf16Read, as the fused attention keeps them), its
  backward reads its output, and the LayerNorms' backward their xhat, as kept, rounded to
  bfloat16 (Bf16KeptAttention, Bf16KeptLayerNorm).
- tests/data/gpt_train_bf16_pp2.json: the same bf16 steps as two pipeline stages of one block
  each run them: the activation between the blocks, and its gradient, rounded to bfloat16 (the
  bfloat16 pipeline wire, Bf16Wire).
"""

import math

import torch
import torch.nn.functional as F

from make_golden import DTYPE, model_goldens, write

SEED = 20261201
LAYERS, HIDDEN, HEADS, SEQ, VOCAB, BATCH = 2, 32, 4, 16, 256, 4
STEPS, LR, MIN_LR, WARMUP, CLIP, WD = 5, 1e-2, 1e-3, 2, 1.0, 0.1
CLIP_INACTIVE = 10.0


def parameter_shapes():
    h, f = HIDDEN, 4 * HIDDEN
    shapes = {"transformer.wte.weight": (VOCAB, h), "transformer.wpe.weight": (SEQ, h)}
    for i in range(LAYERS):
        p = f"transformer.h.{i}."
        shapes.update({p + "ln_1.weight": (h,), p + "ln_1.bias": (h,)})
        for name in ("q", "k", "v"):
            shapes.update({p + f"attn.{name}.weight": (h, h), p + f"attn.{name}.bias": (h,)})
        shapes.update({p + "attn.c_proj.weight": (h, h), p + "attn.c_proj.bias": (h,),
                       p + "ln_2.weight": (h,), p + "ln_2.bias": (h,),
                       p + "mlp.c_fc.weight": (f, h), p + "mlp.c_fc.bias": (f,),
                       p + "mlp.c_proj.weight": (h, f), p + "mlp.c_proj.bias": (h,)})
    shapes.update({"transformer.ln_f.weight": (h,), "transformer.ln_f.bias": (h,)})
    return shapes


def initial_parameters(gen):
    params = {}
    for name, shape in parameter_shapes().items():
        noise = torch.randn(shape, generator=gen, dtype=DTYPE)
        if ".ln_" in name and name.endswith(".weight"):
            params[name] = 1.0 + 0.1 * noise
        elif name.endswith(".bias"):
            params[name] = 0.1 * noise
        else:
            params[name] = 0.2 * noise
    return params


def bf16(t):
    """t rounded to bfloat16 (to nearest even) and widened back to its dtype."""
    return t.to(torch.bfloat16).to(t.dtype)


class Bf16Linear(torch.autograd.Function):
    """F.linear on bfloat16 operands, as `train --bf16` computes it: the input and the weight,
    and in backward the output gradient, rounded to bfloat16; their products summed in the
    working dtype (float32); the bias and its gradient as they are."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        xr, wr = bf16(x), bf16(weight)
        ctx.save_for_backward(xr, wr)
        ctx.has_bias = bias is not None
        y = xr @ wr.t()
        return y if bias is None else y + bias

    @staticmethod
    def backward(ctx, dy):
        xr, wr = ctx.saved_tensors
        g = bf16(dy)
        dx = g @ wr
        dw = g.reshape(-1, g.shape[-1]).t() @ xr.reshape(-1, xr.shape[-1])
        return dx, dw, dy.reshape(-1, dy.shape[-1]).sum(0) if ctx.has_bias else None


def bf16_linear(x, weight, bias=None):
    return Bf16Linear.apply(x, weight, bias)


class Bf16Read(torch.autograd.Function):
    """A float32 tensor as `train --bf16` reads it: rounded to bfloat16, its gradient passed on
    unchanged (a master weight the forward reads; attention's q, k and v)."""

    @staticmethod
    def forward(ctx, master):
        return bf16(master)

    @staticmethod
    def backward(ctx, g):
        return g


class Bf16Wire(torch.autograd.Function):
    """What crosses a bfloat16 pipeline wire: the activation rounded to bfloat16 on its way to the
    next stage, and its gradient rounded on the way back."""

    @staticmethod
    def forward(ctx, x):
        return bf16(x)

    @staticmethod
    def backward(ctx, dx):
        return bf16(dx)


def no_wire(x, block):
    return x


def wire_after_block_0(x, block):
    return Bf16Wire.apply(x) if block == 0 else x


def bf16_head(x, weight):
    """The tied head of a `train --bf16` run: bfloat16 logits (the bfloat16 product rounded once),
    whose gradient is bfloat16 as well."""
    return Bf16Wire.apply(bf16_linear(x, weight))


def bf16_fc1(x, weight, bias):
    """GPT-2's fc1 in a `train --bf16` run: its product rounded to bfloat16 before its bias
    (fused_mlp keeps that product as bfloat16), the gradient rounded as the GEMMs round it."""
    return Bf16Wire.apply(bf16_linear(x, weight)) + bias


def layer_norm(x, weight, bias):
    return F.layer_norm(x, (HIDDEN,), weight, bias, 1e-5)


class Bf16KeptLayerNorm(torch.autograd.Function):
    """layer_norm as `train --bf16` differentiates it: the forward on the float32 input, the
    backward from xhat = (x - mean) rstd as kept, rounded to bfloat16, with the forward's
    float32 rstd (autograd::keep_activation)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        mean = x.mean(-1, keepdim=True)
        rstd = torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)
        ctx.save_for_backward(bf16((x - mean) * rstd), weight, rstd)
        return layer_norm(x, weight, bias)

    @staticmethod
    def backward(ctx, dy):
        xhat, weight, rstd = ctx.saved_tensors
        g = dy * weight
        dx = rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
        rows = tuple(range(dy.dim() - 1))
        return dx, (dy * xhat).sum(rows), dy.sum(rows)


def scores(q, k):
    """The scaled causal scores q k^T / sqrt(head_dim), -inf above the diagonal."""
    t = q.shape[-2]
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return att.masked_fill(~causal, float("-inf"))


def attention(q, k, v):
    return scores(q, k).softmax(dim=-1) @ v


class Bf16KeptAttention(torch.autograd.Function):
    """Causal attention as `train --bf16`'s fused kernel computes it (seq 16 is one key block of
    the kernel's tiles): the unnormalized probabilities exp(S - rowmax) rounded to bfloat16 for
    their product with v, the row sums from the unrounded ones; backward's D = rowsum(dO * O)
    from the output as kept, rounded to bfloat16, and the products' operands P, dO and dS rounded
    to bfloat16 (FlashAttention-2's bfloat16 kernels)."""

    @staticmethod
    def forward(ctx, q, k, v):
        s = scores(q, k)
        e = (s - s.amax(-1, keepdim=True)).exp()
        o = (bf16(e) @ v) / e.sum(-1, keepdim=True)
        ctx.save_for_backward(q, k, v, bf16(o))
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o = ctx.saved_tensors
        p = scores(q, k).softmax(dim=-1)
        dor = bf16(do)
        ds = p * (dor @ v.transpose(-2, -1) - (do * o).sum(-1, keepdim=True))
        ds = bf16(ds / math.sqrt(q.shape[-1]))
        return ds @ k, ds.transpose(-2, -1) @ q, bf16(p).transpose(-2, -1) @ dor


def loss_of(p, tokens, targets, linear=F.linear, wire=no_wire, head=None, fc1=None,
            qkv=lambda t: t, norm=layer_norm, attend=attention):
    b, t = tokens.shape
    x = p["transformer.wte.weight"][tokens] + p["transformer.wpe.weight"][torch.arange(t)]
    d = HIDDEN // HEADS
    for i in range(LAYERS):
        h = f"transformer.h.{i}."
        a = norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"])
        q, k, v = (qkv(linear(a, p[h + f"attn.{n}.weight"], p[h + f"attn.{n}.bias"]))
                   .view(b, t, HEADS, d).transpose(1, 2) for n in ("q", "k", "v"))
        y = attend(q, k, v).transpose(1, 2).reshape(b, t, HIDDEN)
        x = x + linear(y, p[h + "attn.c_proj.weight"], p[h + "attn.c_proj.bias"])
        m = norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"])
        m = F.gelu((fc1 or linear)(m, p[h + "mlp.c_fc.weight"], p[h + "mlp.c_fc.bias"]))
        x = x + linear(m, p[h + "mlp.c_proj.weight"], p[h + "mlp.c_proj.bias"])
        x = wire(x, i)
    x = norm(x, p["transformer.ln_f.weight"], p["transformer.ln_f.bias"])
    logits = (head or linear)(x, p["transformer.wte.weight"])
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def learning_rate(step):
    if step <= WARMUP:
        return LR * step / WARMUP
    progress = (step - WARMUP) / (STEPS - WARMUP)
    return MIN_LR + 0.5 * (LR - MIN_LR) * (1 + math.cos(math.pi * progress))


def batch(gen):
    windows = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)
    return windows[:, :SEQ], windows[:, 1:]


def main():
    gen = torch.Generator().manual_seed(SEED)
    initial = initial_parameters(gen)
    tokens, targets = batch(gen)

    write("gpt.json", model_goldens(loss_of, initial, tokens, targets))

    batches = [batch(gen) for _ in range(STEPS)]
    write("gpt_train.json", train_steps(initial, batches, CLIP))
    write("gpt_train_clip_inactive.json", train_steps(initial, batches, CLIP_INACTIVE))
    initial32 = {n: t.float() for n, t in initial.items()}
    bf16 = dict(read=Bf16Read.apply, head=bf16_head, fc1=bf16_fc1, qkv=Bf16Read.apply,
                norm=Bf16KeptLayerNorm.apply, attend=Bf16KeptAttention.apply)
    write("gpt_train_bf16.json", train_steps(initial32, batches, CLIP, bf16_linear, **bf16))
    write("gpt_train_bf16_pp2.json",
          train_steps(initial32, batches, CLIP, bf16_linear, wire_after_block_0, **bf16))


def train_steps(initial, batches, clip, linear=F.linear, wire=no_wire, read=lambda t: t,
                head=None, fc1=None, qkv=lambda t: t, norm=layer_norm, attend=attention):
    """Five AdamW steps from `initial` on `batches`, clipping the global norm at `clip`, with
    `linear` for every linear layer, `head` for the tied head and `fc1` for the MLP's first layer
    (`linear` when None), `wire` after each block, the forward reading each parameter through
    `read`, attention reading q, k and v through `qkv`, `norm` for every LayerNorm and `attend`
    for attention's core."""
    params = {n: t.clone().requires_grad_(True) for n, t in initial.items()}
    decay = [t for t in params.values() if t.dim() >= 2]
    no_decay = [t for t in params.values() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.95), eps=1e-8)
    train = {}
    for step, (tokens, targets) in enumerate(batches, start=1):
        for group in opt.param_groups:
            group["lr"] = learning_rate(step)
        opt.zero_grad(set_to_none=True)
        loss = loss_of({n: read(t) for n, t in params.items()}, tokens, targets, linear, wire,
                       head, fc1, qkv, norm, attend)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(list(params.values()), clip)
        opt.step()
        train.update({f"tokens.{step}": tokens, f"targets.{step}": targets,
                      f"loss.{step}": loss, f"grad_norm.{step}": grad_norm})
    train.update({f"final.{n}": t for n, t in params.items()})
    return train


if __name__ == "__main__":
    main()
