#!/usr/bin/python3
"""The PyTorch golden of GPT-2-shaped training from an llm.c model file (the gpt2_golden_* ctests).

Two parts:

  make_gpt2_golden.py inputs OUT
      Python's standard library only (ctest runs it, torch is not needed): writes OUT/model.bin,
      an llm.c model file (version 3, float32: header 20240326, 3, maxT, V, L, NH, C, Vp, then
      wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw,
      fcprojb, lnfw, lnfb; docs/checkpoints.md), and OUT/shard.bin, an llm.c token shard
      (20240520, version 1, uint16 ids). Same bytes on every run and machine.
  /usr/bin/python3 tools/make_gpt2_golden.py golden [--out tests/data]
      Needs torch (Debian's python3-torch, the system interpreter): writes the inputs into a
      temporary folder, reads them back, and trains in float64 exactly as `mpitron train
      --init-from model.bin --data shard.bin` with FLAGS below does. Writes
      tests/data/gpt2_golden.json and tests/data/gpt2_golden_final.bin. Rerunning it
      reproduces both byte for byte; commit them with any change to this script.

The model: GPT-2's layout (tanh GELU, LayerNorm eps 1e-5, causal attention, LM head tied to
wte) at V 50257 padded to Vp 50304, maxT 16, L 2, NH 2, C 8. Its weights come from a seeded
random.Random: each value is (u1 + u2 + u3 + u4 - 2) sqrt(3) (a bell-shaped unit-variance draw
of four uniforms; only additions, products and square roots, which IEEE rounds the same way
everywhere, so the bytes do not depend on the machine's libm) times a scale: GPT-2's init
rescaled to width 8 (0.02 sqrt(768 / 8), about 0.2) for wte and the block matrices, half that
for wpe (GPT-2's 0.01) and the two projections (GPT-2's 1/sqrt(2 L)), and, so that no parameter
is trivial, 0.1 for every bias and LayerNorm bias and 1 + 0.1 noise for the LayerNorm weights.
wte's padding rows 50257 .. 50303 are zero.

The data: 170 tokens, a repeating 23-token phrase over the whole vocabulary (ids 0, 50255 and
the end-of-text id 50256 in it) with one token in four replaced by a random id. As a single
shard without a val shard the first 153 (90 %) train and 17 validate (2 windows of 8).

The run (FLAGS): seq 8, global batch 4 of micro-batches of 1, --data-order sequential (llm.c's
geometry: step k reads tokens from (k - 1) mod E * 32 on, sequence i of the step at 8 i; an
epoch holds E = (153 - 1) // 32 = 4 steps, so step 5 reads step 1's tokens again), 5 AdamW steps
(betas 0.9/0.99, eps 1e-8, weight decay 0.1 on wte, wpe and the block matrices, not on biases
or LayerNorm parameters), lr 1e-2 with 2 warmup steps, then cosine to 1e-3 at step 5, global-norm
clipping at 1.0 (the norms of steps 1 to 4, 1.05 to 1.61, are above it and clipped, step 5's,
0.86, is not), and the validation loss after the last step. The padded logits take no part in
the softmax, the loss or the gradient. The key biases' gradient is zero in exact arithmetic (a
shift of every score of a query, which the softmax ignores), so here they stay as they start,
while a float32 run moves them by AdamW's normalised rounding noise (the checker allows for
that).

What is stored (the inputs are not: ctest regenerates them, and their SHA-256 is recorded):
  gpt2_golden.json       sizes, FLAGS, the inputs' SHA-256, and per step the loss, the gradient
                         norm before clipping and the learning rate, then the final val_loss
                         (float64, Python's repr)
  gpt2_golden_final.bin  the weights after step 5 as an llm.c model file (version 3: float32,
                         the float64 values rounded to nearest; 1.6 MB, wte with its Vp rows),
                         the file `mpitron export --format llmc` writes of the run's checkpoint
"""
import argparse
import array
import hashlib
import json
import math
import os
import random
import struct
import sys
import tempfile

MAX_T, V, VP, L, NH, C = 16, 50257, 50304, 2, 2, 8
SEQ, GLOBAL_BATCH, MICRO_BATCH, STEPS = 8, 4, 1, 5
LR, MIN_LR, WARMUP, BETA1, BETA2, EPS, WD, CLIP = 1e-2, 1e-3, 2, 0.9, 0.99, 1e-8, 0.1, 1.0
TOKENS, PHRASE, SEED = 170, 23, 20261207
LLMC_MAGIC, SHARD_MAGIC = 20240326, 20240520

# The flags of `mpitron train` besides --init-from, --data, the topology and the output files.
FLAGS = ["--seq", str(SEQ), "--global-batch", str(GLOBAL_BATCH), "--micro-batch",
         str(MICRO_BATCH), "--steps", str(STEPS), "--data-order", "sequential",
         "--lr", repr(LR), "--min-lr", repr(MIN_LR), "--warmup-steps", str(WARMUP),
         "--lr-decay-style", "cosine", "--adam-beta1", repr(BETA1), "--adam-beta2", repr(BETA2),
         "--adam-eps", repr(EPS), "--weight-decay", repr(WD), "--grad-clip", repr(CLIP),
         "--eval-interval", "0", "--eval-iters", "0"]

# llm.c's arrays in file order: (name, shape).
ARRAYS = [("wte", [VP, C]), ("wpe", [MAX_T, C]), ("ln1w", [L, C]), ("ln1b", [L, C]),
          ("qkvw", [L, 3 * C, C]), ("qkvb", [L, 3 * C]), ("attprojw", [L, C, C]),
          ("attprojb", [L, C]), ("ln2w", [L, C]), ("ln2b", [L, C]), ("fcw", [L, 4 * C, C]),
          ("fcb", [L, 4 * C]), ("fcprojw", [L, C, 4 * C]), ("fcprojb", [L, C]), ("lnfw", [C]),
          ("lnfb", [C])]
# The arrays that hold matrices (mpitron's parameters of two or more dims): weight decay.
MATRICES = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}
GPT2_SCALE = 0.02 * math.sqrt(768 / C)
SCALES = {"wte": GPT2_SCALE, "wpe": GPT2_SCALE / 2, "qkvw": GPT2_SCALE,
          "attprojw": GPT2_SCALE / math.sqrt(2 * L), "fcw": GPT2_SCALE,
          "fcprojw": GPT2_SCALE / math.sqrt(2 * L)}


def float32_bytes(values):
    data = array.array("f", values)
    if sys.byteorder != "little":
        data.byteswap()
    return data.tobytes()


def initial_arrays():
    """{array name: row-major float values} of the model file, in ARRAYS' order."""
    rng = random.Random(SEED)
    root3 = math.sqrt(3.0)

    def noise():
        return (rng.random() + rng.random() + rng.random() + rng.random() - 2.0) * root3

    arrays = {}
    for name, shape in ARRAYS:
        count = math.prod(shape)
        if name in SCALES:
            scale = SCALES[name]
            values = [scale * noise() for _ in range(count)]
        elif name in ("ln1w", "ln2w", "lnfw"):
            values = [1.0 + 0.1 * noise() for _ in range(count)]
        else:
            values = [0.1 * noise() for _ in range(count)]
        if name == "wte":
            values[V * C:] = [0.0] * ((VP - V) * C)
        arrays[name] = values
    return arrays


def llmc_bytes(arrays):
    header = [LLMC_MAGIC, 3, MAX_T, V, L, NH, C, VP] + [0] * 248
    return struct.pack("<256i", *header) + b"".join(
        float32_bytes(arrays[name]) for name, _ in ARRAYS)


def shard_tokens():
    rng = random.Random(SEED + 1)
    phrase = [rng.randrange(V) for _ in range(PHRASE)]
    phrase[0], phrase[7], phrase[15] = V - 1, 0, V - 2
    return [rng.randrange(V) if rng.random() < 0.25 else phrase[i % PHRASE]
            for i in range(TOKENS)]


def shard_bytes(tokens):
    header = [SHARD_MAGIC, 1, len(tokens)] + [0] * 253
    return struct.pack("<256i", *header) + struct.pack(f"<{len(tokens)}H", *tokens)


def write_inputs(out):
    """Writes OUT/model.bin and OUT/shard.bin; returns {file name: SHA-256}."""
    os.makedirs(out, exist_ok=True)
    files = {"model.bin": llmc_bytes(initial_arrays()), "shard.bin": shard_bytes(shard_tokens())}
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


# ---- the golden (torch) ----

def read_llmc(path, torch):
    """The header's sizes and {array name: float64 tensor} of an llm.c float32 model file."""
    with open(path, "rb") as f:
        data = f.read()
    header = struct.unpack("<256i", data[:1024])
    if header[:8] != (LLMC_MAGIC, 3, MAX_T, V, L, NH, C, VP):
        raise SystemExit(f"{path}: unexpected header {header[:8]}")
    values = array.array("f")
    values.frombytes(data[1024:])
    if sys.byteorder != "little":
        values.byteswap()
    arrays, at = {}, 0
    for name, shape in ARRAYS:
        count = math.prod(shape)
        arrays[name] = torch.tensor(values[at:at + count].tolist(), dtype=torch.float64).view(shape)
        at += count
    if at != len(values):
        raise SystemExit(f"{path}: {len(values) - at} values after the last array")
    return arrays


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    header = struct.unpack("<256i", data[:1024])
    if header[:2] != (SHARD_MAGIC, 1):
        raise SystemExit(f"{path}: not a version 1 token shard")
    return list(struct.unpack(f"<{header[2]}H", data[1024:]))


def cross_entropy(p, tokens, targets, torch):
    """Mean cross-entropy of the model `p` (llm.c's arrays) over [B, T] tokens and targets."""
    functional = torch.nn.functional
    b, t = tokens.shape
    d = C // NH
    x = p["wte"][tokens] + p["wpe"][:t]
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    for i in range(L):
        a = functional.layer_norm(x, (C,), p["ln1w"][i], p["ln1b"][i], 1e-5)
        qkv = functional.linear(a, p["qkvw"][i], p["qkvb"][i])
        q, k, v = (part.reshape(b, t, NH, d).transpose(1, 2) for part in qkv.split(C, dim=-1))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, C)
        x = x + functional.linear(y, p["attprojw"][i], p["attprojb"][i])
        m = functional.layer_norm(x, (C,), p["ln2w"][i], p["ln2b"][i], 1e-5)
        m = functional.gelu(functional.linear(m, p["fcw"][i], p["fcb"][i]), approximate="tanh")
        x = x + functional.linear(m, p["fcprojw"][i], p["fcprojb"][i])
    x = functional.layer_norm(x, (C,), p["lnfw"], p["lnfb"], 1e-5)
    logits = x @ p["wte"][:V].t()  # the padding rows V .. Vp-1 are no logits
    return functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


def learning_rate(step):
    if step <= WARMUP:
        return LR * step / WARMUP
    progress = (step - WARMUP) / (STEPS - WARMUP)
    return MIN_LR + 0.5 * (LR - MIN_LR) * (1.0 + math.cos(math.pi * progress))


def windows(tokens, starts, torch):
    rows = [tokens[s:s + SEQ + 1] for s in starts]
    if any(len(row) != SEQ + 1 for row in rows):
        raise SystemExit("a window runs past the data")
    data = torch.tensor(rows, dtype=torch.int64)
    return data[:, :-1], data[:, 1:]


def golden(out):
    import torch

    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        hashes = write_inputs(folder)
        params = read_llmc(os.path.join(folder, "model.bin"), torch)
        tokens = read_shard(os.path.join(folder, "shard.bin"))
    split = len(tokens) * 9 // 10
    tokens_per_step = GLOBAL_BATCH * SEQ
    steps_per_epoch = (split - 1) // tokens_per_step
    for tensor in params.values():
        tensor.requires_grad_(True)
    optimizer = torch.optim.AdamW(
        [{"params": [params[n] for n, _ in ARRAYS if n in MATRICES], "weight_decay": WD},
         {"params": [params[n] for n, _ in ARRAYS if n not in MATRICES], "weight_decay": 0.0}],
        lr=LR, betas=(BETA1, BETA2), eps=EPS)
    steps = []
    for step in range(1, STEPS + 1):
        first = (step - 1) % steps_per_epoch * tokens_per_step
        inputs, targets = windows(tokens, [first + i * SEQ for i in range(GLOBAL_BATCH)], torch)
        lr = learning_rate(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        loss = cross_entropy(params, inputs, targets, torch)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), CLIP)
        optimizer.step()
        steps.append({"step": step, "loss": loss.item(), "grad_norm": norm.item(), "lr": lr})
    val = tokens[split:]
    val_starts = [i * SEQ for i in range((len(val) - 1) // SEQ)]
    with torch.no_grad():
        val_loss = cross_entropy(params, *windows(val, val_starts, torch), torch).item()
    record = {"sizes": {"maxT": MAX_T, "V": V, "Vp": VP, "L": L, "NH": NH, "C": C},
              "flags": FLAGS, "inputs_sha256": hashes, "steps": steps, "val_loss": val_loss,
              "val_windows": len(val_starts), "final": "gpt2_golden_final.bin"}
    with open(os.path.join(out, "gpt2_golden.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    final = {name: params[name].detach().reshape(-1).tolist() for name, _ in ARRAYS}
    with open(os.path.join(out, "gpt2_golden_final.bin"), "wb") as f:
        f.write(llmc_bytes(final))
    for s in steps:
        print(f"step {s['step']} loss {s['loss']:.6f} grad_norm {s['grad_norm']:.4f} "
              f"lr {s['lr']:.3e}")
    print(f"val_loss {val_loss:.6f} over {len(val_starts)} windows; wrote {out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="part", required=True)
    sub.add_parser("inputs", help="write OUT/model.bin and OUT/shard.bin").add_argument("out")
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")
    sub.add_parser("golden", help="train in float64 with torch").add_argument(
        "--out", default=os.path.normpath(data))
    args = parser.parse_args()
    if args.part == "inputs":
        for name, digest in write_inputs(args.out).items():
            print(f"{os.path.join(args.out, name)} sha256 {digest}")
    else:
        golden(args.out)


if __name__ == "__main__":
    main()
