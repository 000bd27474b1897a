#!/usr/bin/env python3
"""Summarises repeated `mpitron bench comm --json FILE` runs: for every world size, op and size,
the median of the runs' mpitron / MPI time ratios with their range, and the median latencies.

    for i in 1 2 3 4 5; do mpirun -np 2 build/mpitron bench comm --json comm.jsonl; done
    python3 tools/summarize_bench_comm.py comm.jsonl

Each line of the file is one run (bench comm appends); runs of several world sizes may share it.
"""
import argparse
import json
import statistics
import sys


def summarize(runs):
    """Rows of {ranks, op, bytes, runs, mpitron_us, mpi_us, ratio, low, high}: one per world size,
    op and size, in the order the runs first list them, grouped by world size. `ratio` is the
    median of the runs' mpitron_us / mpi_us, `low` and `high` their range; the latencies are the
    medians of each path's own times."""
    times = {}  # (ranks, op, bytes) -> [(mpitron_us, mpi_us)], in first-seen order
    for run in runs:
        if run.get("bench") != "comm":
            continue
        for r in run["results"]:
            times.setdefault((run["world_size"], r["op"], r["bytes"]), []).append(
                (r["mpitron_us"], r["mpi_us"]))
    rows = []
    for (ranks, op, nbytes), pairs in sorted(times.items(), key=lambda item: item[0][0]):
        ratios = [a / b for a, b in pairs]
        rows.append({"ranks": ranks, "op": op, "bytes": nbytes, "runs": len(pairs),
                     "mpitron_us": statistics.median(a for a, _ in pairs),
                     "mpi_us": statistics.median(b for _, b in pairs),
                     "ratio": statistics.median(ratios), "low": min(ratios), "high": max(ratios)})
    return rows


def size_text(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("jsonl", help="file that bench comm --json appended its runs to")
    args = parser.parse_args()
    with open(args.jsonl) as f:
        rows = summarize(json.loads(line) for line in f if line.strip())
    if not rows:
        sys.exit(f"{args.jsonl}: no bench comm runs")
    print(f"{'ranks':>5} {'op':<15} {'bytes':>8} {'runs':>4} {'mpitron us':>11} {'MPI us':>9} "
          f"{'ratio':>6} {'range':>11}")
    for row in rows:
        print(f"{row['ranks']:>5} {row['op']:<15} {size_text(row['bytes']):>8} {row['runs']:>4} "
              f"{row['mpitron_us']:>11.1f} {row['mpi_us']:>9.1f} {row['ratio']:>6.2f} "
              f"{row['low']:>5.2f}-{row['high']:.2f}")


if __name__ == "__main__":
    main()
