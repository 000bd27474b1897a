#!/usr/bin/env python3
"""Driver of the gpt2_golden_* ctests: `mpitron train` from an llm.c model file against the
PyTorch golden of tools/make_gpt2_golden.py. Python standard library only.

  gpt2_golden_check.py --golden JSON --inputs DIR --at T,P,D --work WORK [--perturb FLAGS
                       --expect-mismatch] -- LAUNCH...

LAUNCH is the test launcher's command line with "{np}" for the rank count, ending with the
mpitron executable (checkpoint_cli.py's convention). DIR holds model.bin and shard.bin of
`make_gpt2_golden.py inputs DIR`, whose SHA-256 must be the ones the golden was made from. Runs
`mpitron train --init-from DIR/model.bin --data DIR/shard.bin` with the golden's flags on
(tp, pp, dp) = T,P,D with --metrics and --save, exports the last step with `export --format
llmc`, and compares with the golden: every step's loss, gradient norm (before clipping) and
learning rate and the final validation loss within 1e-5 relative; the exported file's header
equal to the golden file's, wte's padding rows zero, and every final tensor of mpitron's (each
layer's slice of llm.c's stacked arrays, qkvw and qkvb cut into q, k and v) within 1e-5 of the
golden's, relative to the golden tensor's largest absolute value, but for the key biases (see
compare_weights: their gradient is zero in exact arithmetic).

The tolerance: mpitron computes in float32 (unit roundoff 6e-8), the golden in float64. Sums
over the 50257 logits of a row, the batch's 32 tokens and the features, then five AdamW steps,
leave at (1,1,1), (2,2,1) and (2,1,2) relative differences of at most 2.5e-8 in the losses,
2e-7 in the gradient norms and 1.1e-6 in the weights (the largest in wte, where AdamW divides
small gradients by their own size); 1e-5 keeps a margin of about ten, while a wrong GELU, AdamW
setting, schedule or data order moves the weights by 1e-3 and more.

--perturb FLAGS (one string, split at spaces) appends flags to the train command line (the last
value of a flag wins); with --expect-mismatch the run must then differ from the golden in some
number (its metrics must still hold the golden's steps): the test that the comparison can fail
(e.g. --perturb "--gelu erf").

Prints each comparison's largest difference; exits 1 on any failure.
"""
import argparse
import array
import hashlib
import json
import os
import shutil
import struct
import sys

from checkpoint_cli import fail, mpitron, topology

RTOL = 1e-5
# llm.c's arrays after wte and wpe, in file order: mpitron's block tensor that one layer's slice
# is ("{}": q, k, v one after the other) and its size as (matrix C x C units, vector C units).
BLOCK_ARRAYS = [("ln_1.weight", 0, 1), ("ln_1.bias", 0, 1), ("attn.{}.weight", 3, 0),
                ("attn.{}.bias", 0, 3), ("attn.c_proj.weight", 1, 0), ("attn.c_proj.bias", 0, 1),
                ("ln_2.weight", 0, 1), ("ln_2.bias", 0, 1), ("mlp.c_fc.weight", 4, 0),
                ("mlp.c_fc.bias", 0, 4), ("mlp.c_proj.weight", 4, 0), ("mlp.c_proj.bias", 0, 1)]


def llmc_tensors(path, sizes):
    """The header (8 int32) and {mpitron's parameter name: values} of an llm.c float32 model
    file: each layer's slice of the stacked arrays, qkvw and qkvb cut into q, k and v."""
    with open(path, "rb") as f:
        data = f.read()
    header = list(struct.unpack("<8i", data[:32]))
    values = array.array("f")
    values.frombytes(data[1024:])
    if sys.byteorder != "little":
        values.byteswap()
    c = sizes["C"]
    tensors, at = {}, 0

    def take(name, count):
        nonlocal at
        tensors[name] = values[at:at + count]
        at += count

    take("transformer.wte.weight", sizes["Vp"] * c)
    take("transformer.wpe.weight", sizes["maxT"] * c)
    for part, matrices, vectors in BLOCK_ARRAYS:
        count = matrices * c * c + vectors * c
        for layer in range(sizes["L"]):
            names = [part.format(which) for which in "qkv"] if "{}" in part else [part]
            for name in names:
                take(f"transformer.h.{layer}.{name}", count // len(names))
    take("transformer.ln_f.weight", c)
    take("transformer.ln_f.bias", c)
    if at != len(values):
        fail(f"{path}: {len(values)} values, the header {header} says {at}")
    return header, tensors


def metrics_records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Comparison:
    """Collects the largest relative differences; a failure is kept, not raised, so that a run
    prints every comparison."""

    def __init__(self):
        self.failures = []

    def check(self, what, worst, detail=""):
        verdict = "ok" if worst <= RTOL else "FAILS"
        print(f"{what}: max relative difference {worst:.3e} (tolerance {RTOL:g}) {verdict}"
              f"{detail}", flush=True)
        if worst > RTOL:
            self.failures.append(what)


def compare_steps(comparison, golden, work):
    records = metrics_records(os.path.join(work, "metrics.jsonl"))
    steps = {r["step"]: r for r in records if "loss" in r}
    val = [r["val_loss"] for r in records if "val_loss" in r]
    want = golden["steps"]
    if sorted(steps) != [s["step"] for s in want] or len(val) != 1:
        fail(f"the metrics hold steps {sorted(steps)} and {len(val)} val_loss lines, expected "
             f"steps {[s['step'] for s in want]} and one val_loss")
    for key in ("loss", "grad_norm", "lr"):
        pairs = [(steps[s["step"]][key], s[key]) for s in want]
        worst = max(abs(got - exp) / abs(exp) for got, exp in pairs)
        comparison.check(f"{key} of steps 1..{len(want)}", worst,
                         "" if worst <= RTOL else f": (mpitron, golden) {pairs}")
    got, exp = val[0], golden["val_loss"]
    comparison.check("val_loss", abs(got - exp) / abs(exp),
                     "" if abs(got - exp) <= RTOL * abs(exp) else f": {got} vs {exp}")


def compare_weights(comparison, golden, golden_file, exported, initial_file):
    sizes = golden["sizes"]
    want_header, want = llmc_tensors(golden_file, sizes)
    got_header, got = llmc_tensors(exported, sizes)
    _, initial = llmc_tensors(initial_file, sizes)
    if got_header != want_header:
        fail(f"the exported header {got_header} is not the golden's {want_header}")
    if any(got["transformer.wte.weight"][sizes["V"] * sizes["C"]:]):
        fail("the exported wte's padding rows are not zero")
    worst, worst_name = 0.0, None
    for name, expected in want.items():
        if name.endswith(".attn.k.bias"):
            continue
        scale = max(abs(x) for x in expected)
        difference = max(abs(a - b) for a, b in zip(got[name], expected)) / scale
        if difference > worst:
            worst, worst_name = difference, name
        if difference > RTOL:
            print(f"  {name}: max difference {difference:.3e} of its max-abs {scale:.4g}")
    keys = [name for name in want if name.endswith(".attn.k.bias")]
    comparison.check(f"final weights ({len(want) - len(keys)} tensors)", worst,
                     f", largest in {worst_name}")
    # The key bias's gradient is zero in exact arithmetic: adding b_k shifts every attention
    # score of a query by the same q . b_k, which the softmax ignores. The float64 golden's
    # key biases stay where they started; mpitron's (like PyTorch's in float32) move by AdamW's
    # update of float32 noise, m / (sqrt(v) + eps) with gradients of about 1e-10 against eps
    # 1e-8: each step less than its learning rate.
    bound = sum(s["lr"] for s in golden["steps"])
    moves = []
    for name in keys:
        scale = max(abs(x) for x in initial[name])
        still = max(abs(a - b) for a, b in zip(want[name], initial[name])) / scale
        if still > RTOL:
            fail(f"the golden's {name} moved by {still:.3e} of its max-abs; its gradient is 0")
        moves.append(max(abs(a - b) for a, b in zip(got[name], initial[name])))
    verdict = "ok" if max(moves) <= bound else "FAILS"
    print(f"key biases ({len(keys)} tensors, gradient 0 in exact arithmetic): the golden's "
          f"unchanged, mpitron's moved at most {max(moves):.3e} (bound: the sum of the learning "
          f"rates, {bound:.4g}) {verdict}", flush=True)
    if verdict != "ok":
        comparison.failures.append("key biases")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--golden", required=True)
    p.add_argument("--inputs", required=True)
    p.add_argument("--at", type=topology, required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--perturb", default="")
    p.add_argument("--expect-mismatch", action="store_true")
    split = sys.argv.index("--") if "--" in sys.argv else len(sys.argv)
    args = p.parse_args(sys.argv[1:split])
    args.launch = sys.argv[split + 1:]
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    with open(args.golden) as f:
        golden = json.load(f)
    model, shard = (os.path.join(args.inputs, name) for name in ("model.bin", "shard.bin"))
    for path in (model, shard):
        digest, want = sha256(path), golden["inputs_sha256"][os.path.basename(path)]
        if digest != want:
            fail(f"{path} has SHA-256 {digest}, the golden was made from {want}: rerun "
                 f"tools/make_gpt2_golden.py golden after changing its inputs")
    checkpoint = os.path.join(args.work, "checkpoint")
    mpitron(args, args.at, "train", "--init-from", model, "--data", shard, *golden["flags"],
            "--progress", "off", "--metrics", os.path.join(args.work, "metrics.jsonl"),
            "--save", checkpoint, *args.perturb.split())
    exported = os.path.join(args.work, "final.bin")
    mpitron(args, [1, 1, 1], "export", "--load", checkpoint, "--format", "llmc", "--out",
            exported)
    comparison = Comparison()
    compare_steps(comparison, golden, args.work)
    compare_weights(comparison, golden,
                    os.path.join(os.path.dirname(args.golden), golden["final"]), exported, model)
    where = "tp {} pp {} dp {}".format(*args.at)
    if args.expect_mismatch:
        if not comparison.failures:
            fail(f"{where} with {args.perturb!r} still matches the golden")
        print(f"{where} with {args.perturb!r} differs from the golden, as it must: "
              f"{', '.join(comparison.failures)}")
    elif comparison.failures:
        fail(f"{where} differs from the golden: {', '.join(comparison.failures)}")
    else:
        print(f"{where} matches the PyTorch golden")


if __name__ == "__main__":
    main()
