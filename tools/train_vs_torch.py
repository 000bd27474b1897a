#!/usr/bin/python3
"""`mpitron train` beside the PyTorch peer (shared/peers/torch_peer_gpt.py), same hour, same model.

Runs the README example's model and batch (4 layers, hidden 256, 8 heads, seq 128, global batch
32 on the GPL-3 text) for a few steps at each mpitron topology and the peer with DDP at the same
rank counts (per-rank batch 32 / ranks), then prints one Markdown table of ms/step and tokens/s.
mpitron's figure is the mean of its per-step `ms` (the `--metrics` lines) after `--skip` steps;
the peer's is its own report (timed steps after `--warmup` untimed ones). The peer needs
Debian's python3-torch with OpenBLAS at one thread per rank (OPENBLAS_NUM_THREADS=1, set here).

    /usr/bin/python3 tools/train_vs_torch.py --mpitron build/mpitron \
        --peer ../shared/peers/torch_peer_gpt.py --steps 8
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

MODEL = ["--layers", "4", "--hidden", "256", "--heads", "8", "--seq", "128"]
GLOBAL_BATCH = 32
TOPOLOGIES = [(1, 1, 1), (2, 1, 1), (2, 2, 1), (1, 1, 2), (2, 2, 2)]


def mpirun(np: int) -> list[str]:
    return ["mpirun", "--oversubscribe", "-np", str(np)] if np > 1 else []


def run(cmd: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"train_vs_torch: {' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def mpitron_ms(args, topology, env) -> float:
    tp, pp, dp = topology
    with tempfile.TemporaryDirectory() as scratch:
        metrics = os.path.join(scratch, "metrics.jsonl")
        run(mpirun(tp * pp * dp) + [args.mpitron, "train", "--tp", str(tp), "--pp", str(pp),
             "--dp", str(dp), "--data", args.data, *MODEL, "--global-batch", str(GLOBAL_BATCH),
             "--micro-batch", "4", "--steps", str(args.steps + args.skip), "--eval-interval", "0",
             "--eval-iters", "1", "--metrics", metrics, "--log-dir", scratch], env)
        with open(metrics) as f:
            lines = [json.loads(line) for line in f]
    ms = [line["ms"] for line in lines if "ms" in line][args.skip:]
    return sum(ms) / len(ms)


def peer_ms(args, ranks, env) -> float:
    peer = [args.peer] if ranks == 1 else [
        os.path.join(os.path.dirname(args.peer), "torchrun311.py"), "--standalone",
        f"--nproc_per_node={ranks}", args.peer]
    out = run(["/usr/bin/python3", *peer, "--data", args.data, *MODEL,
               "--batch", str(GLOBAL_BATCH // ranks), "--steps", str(args.steps),
               "--warmup", str(args.skip)], env)
    report = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    return report["ms_per_step"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mpitron", default="build/mpitron")
    p.add_argument("--peer", default="../shared/peers/torch_peer_gpt.py")
    p.add_argument("--data", default="/usr/share/common-licenses/GPL-3")
    p.add_argument("--steps", type=int, default=8, help="timed steps per run")
    p.add_argument("--skip", type=int, default=2, help="untimed first steps per run")
    args = p.parse_args()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               OMPI_MCA_mpi_yield_when_idle="1")
    tokens = GLOBAL_BATCH * 128
    peer_by_ranks: dict[int, float] = {}
    print(f"{platform.node()}, {os.cpu_count()} CPUs, {datetime.date.today()}; "
          f"{args.steps} timed steps after {args.skip}; {tokens} tokens per step\n")
    print("| (tp, pp, dp) | ranks | mpitron ms/step | tokens/s | PyTorch DDP ms/step | tokens/s |")
    print("|---|---|---|---|---|---|")
    for topology in TOPOLOGIES:
        ranks = topology[0] * topology[1] * topology[2]
        ours = mpitron_ms(args, topology, env)
        if ranks not in peer_by_ranks:
            peer_by_ranks[ranks] = peer_ms(args, ranks, env)
        theirs = peer_by_ranks[ranks]
        print(f"| {topology} | {ranks} | {ours:.0f} | {tokens / ours * 1e3:.0f} | {theirs:.0f} | "
              f"{tokens / theirs * 1e3:.0f} |", flush=True)


if __name__ == "__main__":
    main()
