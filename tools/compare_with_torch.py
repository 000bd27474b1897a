#!/usr/bin/python3
"""mpitron beside its PyTorch peers (tools/torch_peer_*.py): same hour, same model, one table.

  --workload gpt: `mpitron train` against torch_peer_gpt.py (DDP at the same rank count, per-rank
      batch 32 / ranks) on the README example's model and batch (4 layers, hidden 256, 8 heads,
      seq 128, global batch 32, GPL-3 text). mpitron's figure is the mean of its per-step `ms`
      (the `--metrics` lines) after --skip steps; the peer's is its own report.
  --workload llama: the same against torch_peer_gpt.py --arch llama on SmolLM-135M's width (hidden
      576, 9 heads, 3 kv heads, SwiGLU 1536, vocab 49152, tied, RoPE theta 10000) at 4 of its 30
      layers, seq 128, global batch 6 in micro-batches of 3 (so a run fits in a minute on 2 cores;
      6 splits over the peer's 1, 2 or 3 DDP ranks); tp must divide the 3 kv heads.
  --workload mlp: `mpitron bench` against torch_peer_mlp.py at the same (tp, pp, dp) (hidden 512,
      intermediate 2048, batch 8, seq 128, 4 layers), both with --skip warm-up steps, plus each
      side's peak RSS per rank, and mpitron once more with --recompute (ms/step, peak RSS).
MFU is the whole job's model GFLOP/s over ranks x threads x --peak-gflops (one core's peak). Both
sides run under `mpirun --oversubscribe -np N` (one process when N is 1; with `--bind-to none`
when T > 1), at --threads T threads per rank (default 1): mpitron's --threads, the peers'
torch.set_num_threads and OPENBLAS_NUM_THREADS / OMP_NUM_THREADS (set to T). The peers need
Debian's python3-torch and libopenblas0-pthread.

    /usr/bin/python3 tools/compare_with_torch.py --workload gpt --peak-gflops 243 \\
        [--topologies "1,1,1;2,1,1"] [--threads 2] [--bf16]

--bf16 (gpt, llama) runs `train --bf16` beside the peer's --bf16 (CPU autocast to bfloat16).
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

GPT_MODEL = ["--layers", "4", "--hidden", "256", "--heads", "8", "--seq", "128"]
GPT_BATCH, GPT_SEQ = 32, 128
GPT_FLOP_PER_TOKEN = 6 * (12 * 4 * 256 * 256 + 256 * 256) + 12 * 4 * 256 * 128  # PaLM estimate
LLAMA_MODEL = ["--arch", "llama", "--layers", "4", "--hidden", "576", "--heads", "9", "--kv-heads",
               "3", "--ffn-hidden", "1536", "--vocab", "49152", "--seq", "128"]
LLAMA_BATCH, LLAMA_SEQ = 6, 128
LLAMA_FLOP_PER_TOKEN = (6 * (4 * (2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536) + 49152 * 576)
                        + 12 * 4 * 576 * 128)  # as nn::gpt_flops_per_token
MLP_MODEL = ["--hidden", "512", "--intermediate", "2048", "--batch", "8", "--seq", "128",
             "--layers", "4"]
TOPOLOGIES = {"gpt": [(1, 1, 1), (2, 1, 1), (2, 2, 1), (1, 1, 2), (2, 2, 2)],
              "llama": [(1, 1, 1), (3, 1, 1), (1, 1, 2)],
              "mlp": [(1, 1, 1), (2, 1, 1), (2, 2, 1), (1, 1, 2)]}
TOOLS = os.path.dirname(os.path.abspath(__file__))


def mpirun(np: int, threads: int) -> list[str]:
    """The launcher of `np` ranks of `threads` threads: Open MPI binds each of up to 2 ranks to
    one core, which would leave a rank's other threads none, so ranks of more than one thread
    are not bound."""
    if np == 1:
        return []
    return ["mpirun", "--oversubscribe", "-np", str(np)] + (
        ["--bind-to", "none"] if threads > 1 else [])


def peer(name: str, ranks: int, threads: int, report: str) -> list[str]:
    """The command line of tools/`name` on `ranks` ranks, appending its JSON line to `report`."""
    return mpirun(ranks, threads) + ["/usr/bin/python3", os.path.join(TOOLS, name), "--json",
                                     report]


def run(cmd: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"compare_with_torch: {' '.join(cmd)} failed ({done.returncode}):\n"
                 f"{done.stderr[-2000:]}")
    return done.stdout


def last_json(path: str) -> dict:
    with open(path) as f:
        return json.loads(f.readlines()[-1])


def gpt_row(args, topology, env, peer_cache, model=GPT_MODEL,
            batch=GPT_BATCH, micro=4) -> tuple[float, float, list[str]]:
    """`mpitron train` on `model` (flags both sides read) at global `batch` in micro-batches of
    `micro`, beside torch_peer_gpt.py with DDP over all the ranks (batch / ranks each)."""
    tp, pp, dp = topology
    ranks = tp * pp * dp
    with tempfile.TemporaryDirectory() as scratch:
        metrics = os.path.join(scratch, "metrics.jsonl")
        run(mpirun(ranks, args.threads) + [
            args.mpitron, "train", "--tp", str(tp), "--pp", str(pp), "--dp", str(dp), "--data",
            args.data, *model, "--global-batch", str(batch), "--micro-batch", str(micro),
            "--steps", str(args.steps + args.skip), "--eval-interval", "0", "--eval-iters", "1",
            "--threads", str(args.threads), "--metrics", metrics, "--log-dir", scratch,
            *(["--bf16"] if args.bf16 else [])], env)
        with open(metrics) as f:
            ms = [line["ms"] for line in map(json.loads, f) if "ms" in line][args.skip:]
        if ranks not in peer_cache:
            report = os.path.join(scratch, "peer.jsonl")
            run(peer("torch_peer_gpt.py", ranks, args.threads, report) + [
                "--data", args.data, *model, "--batch", str(batch // ranks), "--steps",
                str(args.steps + args.skip), "--skip", str(args.skip), "--threads",
                str(args.threads), *(["--bf16"] if args.bf16 else [])], env)
            peer_cache[ranks] = last_json(report)["ms_per_step"]
    return sum(ms) / len(ms), peer_cache[ranks], []


def bench(args, topology, env, flags, extra) -> dict:
    """mpitron bench's JSON report on `topology` with `flags` + `extra`."""
    tp, pp, dp = topology
    with tempfile.TemporaryDirectory() as scratch:
        report = os.path.join(scratch, "bench.jsonl")
        run(mpirun(tp * pp * dp, args.threads) + [
            args.mpitron, "bench", *flags, *extra, "--steps", str(args.steps), "--warmup",
            str(args.skip), "--threads", str(args.threads), "--json", report, "--log-dir",
            scratch], env)
        return last_json(report)


def mlp_row(args, topology, env, peer_cache) -> tuple[float, float, list[str]]:
    tp, pp, dp = topology
    flags = ["--tp", str(tp), "--pp", str(pp), "--dp", str(dp), *MLP_MODEL]
    ours = bench(args, topology, env, flags, [])
    recomputing = bench(args, topology, env, flags, ["--recompute"])
    with tempfile.TemporaryDirectory() as scratch:
        report = os.path.join(scratch, "peer.jsonl")
        run(peer("torch_peer_mlp.py", tp * pp * dp, args.threads, report) + flags + [
            "--steps", str(args.steps), "--warmup", str(args.skip), "--threads",
            str(args.threads)], env)
        theirs = last_json(report)
    rss = lambda r: f"{max(r['peak_rss_mib_by_rank']):.0f}"  # noqa: E731
    return ours["ms_per_step"], theirs["ms_per_step"], [
        rss(ours), rss(theirs), f"{recomputing['ms_per_step']:.0f}", rss(recomputing)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", choices=["gpt", "llama", "mlp"], default="gpt")
    p.add_argument("--mpitron", default="build/mpitron")
    p.add_argument("--data", default="/usr/share/common-licenses/GPL-3")
    p.add_argument("--steps", type=int, default=6, help="timed steps per run")
    p.add_argument("--skip", type=int, default=2, help="untimed first steps per run")
    p.add_argument("--peak-gflops", type=float, default=0.0, help="one core's peak, for MFU")
    p.add_argument("--threads", type=int, default=1, help="threads per rank, both sides")
    p.add_argument("--topologies", help="'tp,pp,dp;...' (default: the workload's list above)")
    p.add_argument("--bf16", action="store_true",
                   help="gpt and llama: `train --bf16` beside the peer's --bf16 (autocast)")
    args = p.parse_args()
    topologies = ([tuple(int(x) for x in t.split(",")) for t in args.topologies.split(";")]
                  if args.topologies else TOPOLOGIES[args.workload])
    if any(len(t) != 3 or min(t) < 1 for t in topologies):
        p.error(f"--topologies {args.topologies}: expected 'tp,pp,dp;...' of positive integers")
    if not os.access(args.mpitron, os.X_OK):
        p.error(f"--mpitron {args.mpitron}: no such executable (build it: bash scripts/build.sh)")
    if args.bf16 and args.workload == "mlp":
        p.error("--bf16 is for the gpt and llama workloads")
    if args.steps < 1 or args.skip < 0 or args.threads < 1:
        p.error(f"--steps and --threads must be >= 1 and --skip >= 0, got {args.steps}, "
                f"{args.threads} and {args.skip}")
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads),
               OMP_NUM_THREADS=str(args.threads), OMPI_MCA_mpi_yield_when_idle="1")
    if args.workload == "gpt":
        tokens, flop = GPT_BATCH * GPT_SEQ, GPT_BATCH * GPT_SEQ * GPT_FLOP_PER_TOKEN
        row, extra = gpt_row, ""
    elif args.workload == "llama":
        tokens, flop = LLAMA_BATCH * LLAMA_SEQ, LLAMA_BATCH * LLAMA_SEQ * LLAMA_FLOP_PER_TOKEN
        row, extra = (lambda *a: gpt_row(*a, model=LLAMA_MODEL, batch=LLAMA_BATCH, micro=3)), ""  # noqa: E731
    else:
        tokens, flop = 8 * 128, 12 * 512 * 2048 * 4 * 8 * 128
        row, extra = mlp_row, (" mpitron peak RSS MiB/rank | PyTorch peak RSS MiB/rank |"
                               " mpitron --recompute ms/step | its peak RSS MiB/rank |")
    print(f"{platform.node()}, {os.cpu_count()} CPUs, {datetime.date.today()}; {args.workload}"
          f"{' --bf16' if args.bf16 else ''}; "
          f"{args.steps} timed steps after {args.skip}; {tokens} tokens per replica step; "
          f"{args.threads} thread(s) per rank\n")
    print("| (tp, pp, dp) | ranks | mpitron ms/step | MFU | PyTorch ms/step | MFU |" + extra)
    print("|---|---|---|---|---|---|" + ("---|---|---|---|" if extra else ""))
    peer_cache: dict[int, float] = {}
    for topology in topologies:
        ranks = topology[0] * topology[1] * topology[2]
        job_flop = flop * (topology[2] if args.workload == "mlp" else 1)
        ours, theirs, extra_cells = row(args, topology, env, peer_cache)
        cores = ranks * args.threads
        mfu = lambda ms: (f"{100 * job_flop / (ms / 1e3) / 1e9 / (cores * args.peak_gflops):.0f} %"  # noqa: E731
                          if args.peak_gflops > 0 else "-")
        cells = [str(topology), str(ranks), f"{ours:.0f}", mfu(ours), f"{theirs:.0f}", mfu(theirs),
                 *extra_cells]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
