#!/usr/bin/env python3
"""What each memory feature saves (docs/performance.md): `mpitron train --model gpt2` at one
topology with one set of extra flags per row, each row's peak RSS per rank (the largest), train's
memory estimate (the largest) and ms/step (the first step left out). Python standard library
only; a few minutes per row on a 2-core machine.

    tools/bench_memory_features.py --mpitron build/mpitron --data SHARDS \\
        --row "plain|2,2,2|" --row "distributed optimizer|2,2,2|--use-distributed-optimizer" \\
        [--seq 1024 --global-batch 2 --micro-batch 1] [--steps 3] [--out table.md]

A row is LABEL|TP,PP,DP|FLAGS (FLAGS split at spaces). Prints a Markdown table (and writes it to
--out).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_mpi_yield_when_idle": "1"}


def parse_row(text):
    label, sizes, flags = text.split("|")
    tp, pp, dp = (int(x) for x in sizes.split(","))
    return label, (tp, pp, dp), flags.split()


def measure(args, sizes, flags, work):
    tp, pp, dp = sizes
    metrics, report = os.path.join(work, "m.jsonl"), os.path.join(work, "r.json")
    for path in (metrics, report):
        if os.path.exists(path):
            os.remove(path)
    command = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(tp * pp * dp),
               args.mpitron, "train", "--model", "gpt2", "--seq", str(args.seq),
               "--global-batch", str(args.global_batch), "--micro-batch", str(args.micro_batch),
               "--steps", str(args.steps), "--warmup-steps", "1", "--lr", "1e-4", "--min-lr",
               "1e-5", "--eval-interval", "0", "--eval-iters", "1", "--tp", str(tp), "--pp",
               str(pp), "--dp", str(dp), "--metrics", metrics, "--json", report,
               "--log-dir", os.path.join(work, "logs"), *flags]
    if args.data:
        command += ["--data", args.data]
    print("+", " ".join(command), file=sys.stderr, flush=True)
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, **MPI_ENV})
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}):\n{done.stdout[-3000:]}")
    with open(metrics) as f:
        steps = [json.loads(line) for line in f if '"ms"' in line]
    with open(report) as f:
        summary = json.load(f)
    timed = steps[1:] or steps
    return {"ms": sum(s["ms"] for s in timed) / len(timed),
            "rss": max(summary["peak_rss_mib_by_rank"]),
            "estimate": max(summary["memory_estimate_mib_by_rank"]),
            "loss": steps[-1]["loss"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mpitron", required=True)
    p.add_argument("--data", help="train's --data (default: the built-in corpus)")
    p.add_argument("--row", action="append", type=parse_row, required=True)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--global-batch", type=int, default=2)
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--out")
    args = p.parse_args()
    lines = ["| run | (tp,pp,dp) | flags | peak RSS MiB/rank | estimate MiB/rank | ms/step | "
             "last loss |", "|---|---|---|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as work:
        for label, sizes, flags in args.row:
            r = measure(args, sizes, flags, work)
            lines.append(f"| {label} | ({sizes[0]},{sizes[1]},{sizes[2]}) | "
                         f"`{' '.join(flags) or '-'}` | {r['rss']:.0f} | {r['estimate']:.0f} | "
                         f"{r['ms']:.0f} | {r['loss']:.4f} |")
            print(lines[-1], flush=True)
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
