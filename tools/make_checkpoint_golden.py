#!/usr/bin/python3
"""The committed checkpoint of the CLI checkpoint tests and the PyTorch peer's eval of it.

Why a committed checkpoint (and not one trained inside the test): the eval golden must describe
the very weights the test evaluates. A checkpoint trained at test time would be bit-identical to
the one this script fed to the peer only while mpitron's initialisation, sampler, optimizer and
float rounding (compiler, vector width, device) stay exactly as they were here; any legitimate
change there would break the golden without anything being wrong. The committed files pin the
weights, and also prove that checkpoints written by this version keep loading. They are small
(2 layers, hidden 16, 4 heads, context 16, SGD so no optimizer moments: about 65 KB).

What it does (needs a built `mpitron`, mpiexec, and torch for the PyTorch peer
tools/torch_peer_gpt.py or the one --peer names):
  1. `mpitron train` on 4 ranks, (tp, pp, dp) = (2, 2, 1), 1000 SGD steps on the built-in corpus
     (validation loss about 1.6 nats per byte, so that greedy sampling is not one repeated byte),
     saving only the last step into tests/data/checkpoint_tiny/ (so the tests also rebuild full
     tensors from TP slices and pipeline stages);
  2. `mpitron export` of it into a temporary dense file with the nanoGPT names;
  3. `torch_peer_gpt.py --eval` of that file over tests/data/checkpoint_eval.txt at --seq 16 and
     --seq 5 (the mean cross-entropy over the non-overlapping windows, nats per byte);
  4. tests/data/checkpoint_golden.json: those numbers and the train command.
tests/app/checkpoint.cmake runs `mpitron eval` on the committed checkpoint and compares.

    /usr/bin/python3 tools/make_checkpoint_golden.py --mpitron build/mpitron
"""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import tempfile

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(TOOLS, ".."))
DATA = os.path.join(ROOT, "tests", "data")
CHECKPOINT = "checkpoint_tiny"
TEXT = "checkpoint_eval.txt"
HEADS = 4
TRAIN = ["--tp", "2", "--pp", "2", "--dp", "1", "--layers", "2", "--hidden", "16", "--heads",
         str(HEADS), "--seq", "16", "--global-batch", "16", "--micro-batch", "4", "--steps", "1000",
         "--warmup-steps", "5", "--optimizer", "sgd", "--lr", "3", "--min-lr", "0.01",
         "--eval-interval", "0", "--eval-iters", "16", "--seed", "3", "--device", "cpu"]


def run(command):
    print("+", shlex.join(command), flush=True)
    return subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mpitron", required=True, help="the built mpitron executable")
    p.add_argument("--peer", default=os.path.join(TOOLS, "torch_peer_gpt.py"),
                   help="path of torch_peer_gpt.py")
    p.add_argument("--mpiexec", default="mpiexec --oversubscribe --allow-run-as-root",
                   help="launcher command, before -n 4")
    args = p.parse_args()
    mpitron = os.path.abspath(args.mpitron)
    checkpoint = os.path.join(DATA, CHECKPOINT)
    shutil.rmtree(checkpoint, ignore_errors=True)
    with tempfile.TemporaryDirectory() as work:
        logs = ["--log-dir", work]
        run(shlex.split(args.mpiexec) + ["-n", "4", mpitron, "train", *TRAIN, "--save", checkpoint,
                                         *logs])
        model = os.path.join(work, "model.safetensors")
        run([mpitron, "export", "--load", checkpoint, "--out", model, *logs])
        evals = []
        for seq in (16, 5):
            out = run(["/usr/bin/python3", args.peer, "--eval", model, "--data",
                       os.path.join(DATA, TEXT), "--seq", str(seq), "--heads", str(HEADS)])
            peer = json.loads(out.strip().splitlines()[-1])
            evals.append({"seq": seq, "windows": peer["windows"], "loss": peer["loss"]})
    with open(os.path.join(checkpoint, "latest")) as f:
        step = int(f.read().strip().removeprefix("step_"))
    golden = {"checkpoint": CHECKPOINT, "step": step, "data": TEXT, "heads": HEADS,
              "train": shlex.join(["mpitron", "train", *TRAIN]), "peer_evals": evals}
    with open(os.path.join(DATA, "checkpoint_golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
