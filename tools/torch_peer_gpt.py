#!/usr/bin/python3
"""PyTorch peer of `mpitron train`: the same GPT-2-style byte-level model, AdamW, DDP over Gloo.

The model (src/nn/models/gpt_config.h; nanoGPT's layout, biases everywhere, no dropout), vocabulary V
(256 bytes), L blocks of hidden size C, context `block_size`:
    x = wte[idx] + wpe[pos]
    per block: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))
        attn: q, k, v = split(c_attn(x)), causal softmax(q k^T / sqrt(C / heads)) v per head,
              then c_proj;  mlp: c_proj(gelu(c_fc(x))) with the exact (erf) GELU, 4C wide
    logits = ln_f(x) wte^T (the LM head is the token embedding); mean cross-entropy
LayerNorms have eps 1e-5. Its state dict, the names and shapes `mpitron export` writes
(weights are [out, in]; there is no separate lm_head entry):
    transformer.wte.weight [V, C], transformer.wpe.weight [block_size, C], and per block i
    transformer.h.{i}.ln_1.weight, .bias [C]; .attn.c_attn.weight [3C, C] (rows q, k, v), .bias
    [3C]; .attn.c_proj.weight [C, C], .bias [C]; .ln_2.weight, .bias [C]; .mlp.c_fc.weight
    [4C, C], .bias [4C]; .mlp.c_proj.weight [C, 4C], .bias [C]; then transformer.ln_f.weight,
    .bias [C].

Training follows `mpitron train`: the first 90 % of --data trains and the rest validates; each
step reads random windows of seq + 1 bytes (inputs and targets shifted by one), --batch per rank;
GPT-2 initialisation (N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 L)), biases 0);
AdamW (betas 0.9/0.95, eps 1e-8, --weight-decay on tensors of two or more dims only); the
learning rate rises linearly to --lr over --warmup-steps, then follows a cosine to --min-lr at
--steps; the gradients' global norm is clipped to --grad-clip. Rank 0 prints each step and, at
the end, the validation loss and ms/step over the steps after --skip; --json FILE appends them as
one JSON line. With several ranks (launched by Open MPI, which sets OMPI_COMM_WORLD_RANK and
_SIZE) the model is wrapped in DistributedDataParallel; the ranks meet at --rendezvous.

    mpirun --oversubscribe -np 2 /usr/bin/python3 tools/torch_peer_gpt.py \
        --data /usr/share/common-licenses/GPL-3 --batch 16 --steps 200

--eval FILE.safetensors instead loads an exported model (sizes from its tensors, --heads given)
and prints {"windows", "loss", "layers", "hidden"}: the mean cross-entropy in nats per byte over
the non-overlapping windows of --data whose targets fit (what `mpitron eval` computes):

    /usr/bin/python3 tools/torch_peer_gpt.py --eval model.safetensors --data FILE --seq 64 --heads 4

GPT-2 options: --vocab V with --padded-vocab Vp (wte has Vp rows, the rows from V on stay zero
and their logits take no part in the loss, as in mpitron), --gelu tanh, --block-size (the
context, default --seq); --data may be an llm.c token shard (magic 20240520, uint16 ids); and
--init-from FILE.bin starts from an llm.c model file (version 3 float32 or 5 bfloat16; its
sizes replace --layers --hidden --heads --vocab):

    mpirun --oversubscribe -np 2 /usr/bin/python3 tools/torch_peer_gpt.py --init-from \
        gpt2_124M.bin --gelu tanh --data data/x_train_000000.bin --seq 64 --batch 4 --steps 5

--arch llama trains `mpitron train --arch llama`'s model instead (Hugging Face Llama's formulas,
written here, with its parameter names; no biases): x = embed_tokens[idx], per block
x = x + o_proj(attn(rms(x))); x = x + down_proj(silu(gate_proj(m)) * up_proj(m)), m = rms(x),
then logits = norm(x) embed_tokens^T (lm_head^T with --untie-embeddings). RMSNorm
rms(x) = w x / sqrt(mean(x^2) + --norm-eps); attention projects q ([C, C]) and k, v
([--kv-heads head_dim, C]), rotates q and k by RoPE (rotate_half layout, inverse frequencies
--rope-theta^(-2i/head_dim), cos and sin computed once per length), repeats each key/value head
for its --heads / --kv-heads query heads and takes the causal softmax as the GPT does; the SwiGLU
MLP is --ffn-hidden wide (default 4C). Initialisation, AdamW, schedule and data as above (o_proj
and down_proj are the residual projections; norm weights 1, without weight decay). The
SmolLM-135M shape at 4 layers:

    /usr/bin/python3 tools/torch_peer_gpt.py --arch llama --layers 4 --hidden 576 --heads 9 \
        --kv-heads 3 --ffn-hidden 1536 --vocab 49152 --seq 256 --batch 8 --steps 5

--bf16 runs each step's forward under torch.autocast("cpu", dtype=torch.bfloat16), the nearest
thing PyTorch 1.13 has to `train --bf16`: the float32 parameters act as the masters, linear
layers and matmuls multiply bfloat16 copies (oneDNN's bfloat16 GEMM, VDPBF16PS where the CPU has
AVX512-BF16) and autocast keeps LayerNorm and the loss in float32; AdamW updates the float32
parameters.

Needs Debian's python3-torch (numpy comes with it) and libopenblas0-pthread; OpenBLAS runs one
thread per rank unless OPENBLAS_NUM_THREADS says otherwise.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch_peer_common import (  # noqa: E402
    finish_ranks, integer_at_least, peak_rss_mib_by_rank, positive_number, start_ranks)  # noqa: E402


class CausalSelfAttention(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (part.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for part in self.c_attn(x).split(c, dim=2))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        future = torch.ones(t, t, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class Mlp(nn.Module):
    def __init__(self, c, gelu="erf"):
        super().__init__()
        self.c_fc = nn.Linear(c, 4 * c)
        self.c_proj = nn.Linear(4 * c, c)
        self.approximate = "tanh" if gelu == "tanh" else "none"

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate=self.approximate))


class Block(nn.Module):
    def __init__(self, c, heads, gelu="erf"):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c)
        self.attn = CausalSelfAttention(c, heads)
        self.ln_2 = nn.LayerNorm(c)
        self.mlp = Mlp(c, gelu)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """`padded_vocab` rows of wte (default `vocab`); the rows from `vocab` on are zero and their
    logits are left out of the loss. `gelu` is "erf" (exact) or "tanh" (GPT-2's)."""

    def __init__(self, layers, c, heads, block_size, vocab=256, padded_vocab=None, gelu="erf"):
        super().__init__()
        self.vocab = vocab
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(padded_vocab or vocab, c), wpe=nn.Embedding(block_size, c),
            h=nn.ModuleList([Block(c, heads, gelu) for _ in range(layers)]),
            ln_f=nn.LayerNorm(c)))
        for name, param in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(param)
            elif ".ln_" not in name:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(param, 0.0, std)
        with torch.no_grad():
            self.transformer.wte.weight[vocab:] = 0.0

    def forward(self, idx, targets):
        """Mean cross-entropy of `targets` [B, T] after `idx` [B, T]."""
        tr = self.transformer
        x = tr.wte(idx) + tr.wpe(torch.arange(idx.shape[1]))
        for block in tr.h:
            x = block(x)
        logits = F.linear(tr.ln_f(x), tr.wte.weight[:self.vocab])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class RmsNorm(nn.Module):
    def __init__(self, c, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(c))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    """[-x2, x1] of x = [x1, x2] split in halves along the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, c, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, c // heads
        self.q_proj = nn.Linear(c, c, bias=False)
        self.k_proj = nn.Linear(c, kv_heads * self.d, bias=False)
        self.v_proj = nn.Linear(c, kv_heads * self.d, bias=False)
        self.o_proj = nn.Linear(c, c, bias=False)

    def forward(self, x, cos, sin):
        """x [B, T, C]; cos, sin [T, head_dim]."""
        b, t, c = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.d).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        if group > 1:  # repeat each key/value head for its query heads [B, H, T, d]
            k, v = (z[:, :, None].expand(b, self.kv_heads, group, t, self.d)
                    .reshape(b, self.heads, t, self.d) for z in (k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.d)
        future = torch.ones(t, t, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.o_proj(y.transpose(1, 2).reshape(b, t, c))


class SwiGlu(nn.Module):
    def __init__(self, c, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(c, ffn, bias=False)
        self.up_proj = nn.Linear(c, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, c, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, c, heads, kv_heads, ffn, eps):
        super().__init__()
        self.input_layernorm = RmsNorm(c, eps)
        self.self_attn = LlamaAttention(c, heads, kv_heads)
        self.post_attention_layernorm = RmsNorm(c, eps)
        self.mlp = SwiGlu(c, ffn)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    """`mpitron train --arch llama`'s model (the docstring's --arch llama), Hugging Face's names."""

    def __init__(self, layers, c, heads, kv_heads, ffn, vocab, theta=10000.0, eps=1e-5,
                 tied=True):
        super().__init__()
        self.vocab, self.theta, self.d = vocab, theta, c // heads
        self.model = nn.ModuleDict(dict(
            embed_tokens=nn.Embedding(vocab, c),
            layers=nn.ModuleList([LlamaBlock(c, heads, kv_heads, ffn, eps)
                                  for _ in range(layers)]),
            norm=RmsNorm(c, eps)))
        self.lm_head = None if tied else nn.Linear(c, vocab, bias=False)
        for name, param in self.named_parameters():
            if param.dim() >= 2:
                residual = name.endswith(("o_proj.weight", "down_proj.weight"))
                nn.init.normal_(param, 0.0, 0.02 / math.sqrt(2 * layers) if residual else 0.02)
        self.rope = {}

    def cos_sin(self, t):
        """RoPE's cos and sin [t, head_dim] at positions 0..t-1, computed once per length."""
        if t not in self.rope:
            inv_freq = self.theta ** (-torch.arange(0, self.d, 2, dtype=torch.float64) / self.d)
            freqs = torch.outer(torch.arange(t, dtype=torch.float64), inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.rope[t] = (emb.cos().float(), emb.sin().float())
        return self.rope[t]

    def forward(self, idx, targets):
        """Mean cross-entropy of `targets` [B, T] after `idx` [B, T]."""
        cos, sin = self.cos_sin(idx.shape[1])
        x = self.model.embed_tokens(idx)
        for block in self.model.layers:
            x = block(x, cos, sin)
        head = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        logits = F.linear(self.model.norm(x), head)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def flop_per_token(args):
    """The PaLM estimate mpitron prints (nn::gpt_flops_per_token): 6 x the block matmuls' and
    the LM head's weights + 12 L C seq."""
    c = args.hidden
    if args.arch == "llama":
        kv = c * args.kv_heads // args.heads
        block = 2 * c * c + 2 * c * kv + 3 * c * args.ffn_hidden
    else:
        block = 12 * c * c
    return 6 * (args.layers * block + args.vocab * c) + 12 * args.layers * c * args.seq


LLMC_MODEL_MAGIC, LLMC_SHARD_MAGIC = 20240326, 20240520


def read_tokens(path):
    """An llm.c token shard's uint16 ids (256 int32 of header: magic 20240520, version, count),
    or any other file's bytes, as a 1-D int64 tensor."""
    with open(path, "rb") as f:
        head = f.read(1024)
    if len(head) == 1024 and struct.unpack("<i", head[:4])[0] == LLMC_SHARD_MAGIC:
        count = struct.unpack("<3i", head[:12])[2]
        ids = np.fromfile(path, dtype="<u2", offset=1024, count=count)
        return torch.from_numpy(ids.astype(np.int64))
    return torch.from_numpy(np.fromfile(path, dtype=np.uint8).astype(np.int64))


def read_llmc_model(path, gelu):
    """The GPT of an llm.c model file: a header of 256 int32 (20240326, version 3 float32 or 5
    bfloat16, maxT, V, L, NH, C, Vp), then wte [Vp, C], wpe [maxT, C] and per-layer stacks of
    ln_1, c_attn, attn c_proj, ln_2, c_fc and mlp c_proj (weights [out, in]), then ln_f."""
    header = np.fromfile(path, dtype="<i4", count=256)
    if header[0] != LLMC_MODEL_MAGIC or header[1] not in (3, 5):
        raise SystemExit(f"{path}: not an llm.c model file of version 3 or 5")
    max_t, vocab, layers, heads, c, padded = (int(v) for v in header[2:8])
    if header[1] == 3:
        values = np.fromfile(path, dtype="<f4", offset=1024)
    else:  # bfloat16: the high half of a float32
        values = (np.fromfile(path, dtype="<u2", offset=1024).astype(np.uint32) << 16).view("<f4")
    model = GPT(layers, c, heads, max_t, vocab, padded, gelu)
    per_layer = [("ln_1.weight", (c,)), ("ln_1.bias", (c,)), ("attn.c_attn.weight", (3 * c, c)),
                 ("attn.c_attn.bias", (3 * c,)), ("attn.c_proj.weight", (c, c)),
                 ("attn.c_proj.bias", (c,)), ("ln_2.weight", (c,)), ("ln_2.bias", (c,)),
                 ("mlp.c_fc.weight", (4 * c, c)), ("mlp.c_fc.bias", (4 * c,)),
                 ("mlp.c_proj.weight", (c, 4 * c)), ("mlp.c_proj.bias", (c,))]
    order = [("transformer.wte.weight", (padded, c)), ("transformer.wpe.weight", (max_t, c))]
    order += [(f"stack.{name}", (layers,) + shape) for name, shape in per_layer]
    order += [("transformer.ln_f.weight", (c,)), ("transformer.ln_f.bias", (c,))]
    state, offset = {}, 0
    for name, shape in order:
        count = math.prod(shape)
        block = torch.from_numpy(values[offset:offset + count].reshape(shape).copy())
        offset += count
        if name.startswith("stack."):
            for i in range(layers):
                state[f"transformer.h.{i}.{name[6:]}"] = block[i]
        else:
            state[name] = block
    if offset != len(values):
        raise SystemExit(f"{path}: {len(values)} values, the header's sizes need {offset}")
    model.load_state_dict(state, strict=True)
    return model


def windows(data, starts, seq):
    """Inputs data[s, s + seq) and targets data[s + 1, s + seq + 1) for each start s."""
    rows = torch.stack([data[s:s + seq + 1] for s in starts])
    return rows[:, :-1], rows[:, 1:]


@torch.no_grad()
def windows_loss(model, data, seq):
    """Mean cross-entropy over the non-overlapping windows 0, seq, 2 seq, ... of `data` (a 1-D
    int64 array or tensor) whose targets fit, in batches of about 32768 tokens."""
    data = torch.as_tensor(data, dtype=torch.int64)
    starts = range(0, len(data) - seq, seq)
    per_batch = max(1, 32768 // seq)
    total = 0.0
    for first in range(0, len(starts), per_batch):
        part = starts[first:first + per_batch]
        total += model(*windows(data, part, seq)).item() * len(part)
    return total / len(starts)


def read_safetensors(path):
    """The float32 tensors of a safetensors file, by name, in the file's header order."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {entry['dtype']}, only F32 is read")
        begin, end = entry["data_offsets"]
        values = np.frombuffer(data[begin:end], dtype="<f4").reshape(entry["shape"])
        tensors[name] = torch.from_numpy(values.copy())
    return tensors


def evaluate(args):
    state = read_safetensors(args.eval)
    vocab, c = state["transformer.wte.weight"].shape
    block_size = state["transformer.wpe.weight"].shape[0]
    layers = len({name.split(".")[2] for name in state if name.startswith("transformer.h.")})
    model = GPT(layers, c, args.heads, block_size, vocab)
    model.load_state_dict(state, strict=True)
    seq = args.seq or block_size
    data = np.fromfile(args.data, dtype=np.uint8).astype(np.int64)
    count = (len(data) - 1) // seq
    if seq > block_size or count < 1:
        raise SystemExit(f"torch_peer_gpt: --seq {seq} must be at most the context {block_size} "
                         f"and --data must hold one window of {seq + 1} bytes")
    print(json.dumps({"windows": count, "loss": windows_loss(model, data, seq),
                      "layers": layers, "hidden": c}))


def learning_rate(args, step):
    """Linear warmup to --lr over --warmup-steps, then cosine to --min-lr at --steps (step >= 1)."""
    if step <= args.warmup_steps:
        return args.lr * step / max(1, args.warmup_steps)
    progress = min(1.0, (step - args.warmup_steps) / max(1, args.steps - args.warmup_steps))
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * progress))


def train(args):
    rank, world = start_ranks(args.rendezvous)
    torch.manual_seed(args.seed)
    if args.init_from:
        model = read_llmc_model(args.init_from, args.gelu)
        args.layers, args.hidden = len(model.transformer.h), model.transformer.ln_f.weight.shape[0]
        args.heads, args.vocab = model.transformer.h[0].attn.heads, model.vocab
    elif args.arch == "llama":
        model = Llama(args.layers, args.hidden, args.heads, args.kv_heads, args.ffn_hidden,
                      args.vocab, args.rope_theta, args.norm_eps, not args.untie_embeddings)
    else:
        model = GPT(args.layers, args.hidden, args.heads, args.block_size or args.seq, args.vocab,
                    args.padded_vocab, args.gelu)
    ddp = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    data = read_tokens(args.data)
    if int(data.max()) >= args.vocab:
        raise SystemExit(f"torch_peer_gpt: {args.data} holds id {int(data.max())} >= --vocab "
                         f"{args.vocab}")
    split = len(data) * 9 // 10
    if len(data) - split <= args.seq:
        raise SystemExit(f"torch_peer_gpt: {args.data}: its last tenth, the validation data, is "
                         f"shorter than one window of {args.seq + 1} bytes")
    sampler = torch.Generator().manual_seed(args.seed)
    tokens = world * args.batch * args.seq
    times = []
    for step in range(1, args.steps + 1):
        # One global batch from the same generator on every rank; rank r takes rows r, r + world..
        starts = torch.randint(0, split - args.seq, (world * args.batch,), generator=sampler)
        inputs, targets = windows(data, starts[rank::world].tolist(), args.seq)
        lr = learning_rate(args, step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        begin = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss = ddp(inputs, targets)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip).item()
        optimizer.step()
        loss = loss.detach()
        if world > 1:
            dist.all_reduce(loss)
            loss /= world
        ms = 1e3 * (time.perf_counter() - begin)
        if step > args.skip:
            times.append(ms)
        if rank == 0:
            print(f"step {step}/{args.steps} loss {loss.item():.4f} lr {lr:.3e} grad_norm "
                  f"{grad_norm:.4f} {ms:.1f} ms {tokens / (ms / 1e3):.0f} tokens/s", flush=True)

    rss_by_rank = peak_rss_mib_by_rank(world)
    finish_ranks(world)
    if rank != 0:
        return
    val_loss = windows_loss(model, data[split:], args.seq)
    ms = sum(times) / max(1, len(times))
    report = {"tool": "pytorch", "torch": torch.__version__, "arch": args.arch, "world_size": world,
              "bf16": args.bf16,
              "layers": args.layers, "hidden": args.hidden, "heads": args.heads, "seq": args.seq,
              "batch_per_rank": args.batch, "steps": args.steps, "timed_steps": len(times),
              "loss": loss.item(), "val_loss": val_loss, "ms_per_step": ms,
              "tokens_per_s": tokens / (ms / 1e3),
              "achieved_gflops": flop_per_token(args) * tokens / (ms / 1e3) / 1e9,
              "peak_rss_mib_by_rank": rss_by_rank}
    print(f"val_loss {val_loss:.4f}; {ms:.1f} ms/step over steps {args.skip + 1}..{args.steps}, "
          f"{report['tokens_per_s']:.0f} tokens/s, {report['achieved_gflops']:.1f} GFLOP/s, "
          f"peak RSS {max(report['peak_rss_mib_by_rank']):.0f} MiB/rank (max)")
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(report) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/usr/share/common-licenses/GPL-3",
                        help="any file, read as bytes")
    parser.add_argument("--eval", help="evaluate this exported .safetensors model instead")
    for name, default in [("layers", 4), ("hidden", 256), ("heads", 8), ("batch", 8),
                          ("steps", 200)]:
        parser.add_argument(f"--{name}", type=integer_at_least(1), default=default)
    for name, default in [("warmup-steps", 20), ("skip", 2), ("seed", 1234)]:
        parser.add_argument(f"--{name}", type=integer_at_least(0), default=default)
    parser.add_argument("--seq", type=integer_at_least(1), help="sequence length and context "
                        "(train: 128; --eval: the model's context)")
    for name, default in [("lr", 1e-3), ("min-lr", 1e-4), ("grad-clip", 1.0)]:
        parser.add_argument(f"--{name}", type=positive_number, default=default)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--vocab", type=integer_at_least(1), default=256,
                        help="vocabulary (256: --data is bytes; an llm.c shard holds GPT-2 ids)")
    parser.add_argument("--padded-vocab", type=integer_at_least(1),
                        help="rows of wte (default --vocab); the extra rows take no part")
    parser.add_argument("--block-size", type=integer_at_least(1), help="context (default --seq)")
    parser.add_argument("--gelu", choices=("erf", "tanh"), default="erf")
    parser.add_argument("--arch", choices=("gpt2", "llama"), default="gpt2")
    parser.add_argument("--kv-heads", type=integer_at_least(1),
                        help="llama: key/value heads (default --heads)")
    parser.add_argument("--ffn-hidden", type=integer_at_least(1),
                        help="llama: the SwiGLU MLP's width (default 4 --hidden)")
    parser.add_argument("--rope-theta", type=positive_number, default=10000.0)
    parser.add_argument("--norm-eps", type=positive_number, default=1e-5)
    parser.add_argument("--untie-embeddings", action="store_true",
                        help="llama: a separate lm_head")
    parser.add_argument("--init-from", help="an llm.c model file (its sizes replace the flags')")
    parser.add_argument("--rendezvous", default=os.environ.get("TORCH_PEER_RENDEZVOUS",
                                                               "tcp://127.0.0.1:29511"))
    parser.add_argument("--threads", type=integer_at_least(1), default=1,
                        help="intra-op threads per rank (torch.set_num_threads; also set "
                             "OPENBLAS_NUM_THREADS and OMP_NUM_THREADS to it)")
    parser.add_argument("--json", help="append the run's figures as one JSON line (rank 0)")
    parser.add_argument("--bf16", action="store_true",
                        help="the forward under CPU autocast to bfloat16 (float32 parameters)")
    args = parser.parse_args()
    if not args.eval and args.steps <= args.skip:
        parser.error(f"--steps {args.steps} leaves no timed step after --skip {args.skip}")
    if args.hidden % args.heads:
        parser.error(f"--hidden {args.hidden} is not divisible by --heads {args.heads}")
    args.kv_heads = args.kv_heads or args.heads
    args.ffn_hidden = args.ffn_hidden or 4 * args.hidden
    if args.arch == "llama":
        if args.heads % args.kv_heads or (args.hidden // args.heads) % 2:
            parser.error(f"--arch llama needs --heads {args.heads} divisible by --kv-heads "
                         f"{args.kv_heads} and an even head size")
        if args.eval or args.init_from or args.padded_vocab:
            parser.error("--arch llama trains from a random init at the given --vocab "
                         "(no --eval, --init-from or --padded-vocab)")
    for flag, path in (("--data", args.data), ("--eval", args.eval),
                       ("--init-from", args.init_from)):
        if path is not None and not os.path.isfile(path):
            parser.error(f"{flag} {path}: no such file")
    torch.set_num_threads(args.threads)
    if args.eval:
        evaluate(args)
    else:
        args.seq = args.seq or 128
        train(args)


if __name__ == "__main__":
    main()
