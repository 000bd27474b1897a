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
    """Rows of {device, ranks, op, bytes, runs, mpitron_us, mpi_us, ratio, low, high, differ}: one
    per device, world size, op and size, in the order the runs first list them, grouped by device
    and world size. `ratio` is the median of the runs' mpitron_us / mpi_us, `low` and `high` their
    range; the latencies are the medians of each path's own times; `differ` counts the runs whose
    two paths gave different results. Raises KeyError or TypeError for a bench comm run that
    lacks a field."""
    times = {}  # (device, ranks, op, bytes) -> [(mpitron_us, mpi_us, match)], first-seen order
    for run in runs:
        if run.get("bench") != "comm":
            continue
        for r in run["results"]:
            key = (run["device"], run["world_size"], r["op"], r["bytes"])
            times.setdefault(key, []).append(
                (r["mpitron_us"], r["mpi_us"], r.get("results_match", True)))
    rows = []
    for (device, ranks, op, nbytes), found in sorted(times.items(), key=lambda i: i[0][:2]):
        ratios = [a / b for a, b, _ in found]
        rows.append({"device": device, "ranks": ranks, "op": op, "bytes": nbytes,
                     "runs": len(found), "mpitron_us": statistics.median(a for a, _, _ in found),
                     "mpi_us": statistics.median(b for _, b, _ in found),
                     "ratio": statistics.median(ratios), "low": min(ratios), "high": max(ratios),
                     "differ": sum(1 for _, _, match in found if not match)})
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
    try:
        with open(args.jsonl) as f:
            rows = summarize(json.loads(line) for line in f if line.strip())
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"summarize_bench_comm: {args.jsonl}: {type(error).__name__}: {error}",
              file=sys.stderr)
        sys.exit(2)
    if not rows:
        print(f"summarize_bench_comm: {args.jsonl}: no bench comm runs", file=sys.stderr)
        sys.exit(2)
    print(f"{'device':<6} {'ranks':>5} {'op':<15} {'bytes':>11} {'runs':>4} {'mpitron us':>11} "
          f"{'MPI us':>9} {'ratio':>6} {'range':>11}")
    for row in rows:
        differ = f"  RESULTS DIFFERED in {row['differ']} of them" if row["differ"] else ""
        print(f"{row['device']:<6} {row['ranks']:>5} {row['op']:<15} {size_text(row['bytes']):>11} "
              f"{row['runs']:>4} {row['mpitron_us']:>11.1f} {row['mpi_us']:>9.1f} "
              f"{row['ratio']:>6.2f} {row['low']:>5.2f}-{row['high']:.2f}{differ}")


if __name__ == "__main__":
    main()
