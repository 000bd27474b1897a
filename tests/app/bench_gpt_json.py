"""Runs `mpitron bench gpt` with --json and checks its report.

Usage: bench_gpt_json.py REPORT -- LAUNCH... (the mpiexec prefix, mpitron and its bench gpt
arguments, at cp > 1). REPORT is removed first and --json REPORT appended. The run must exit 0
and print its ms/step and balance lines, REPORT must hold one JSON line with every key below,
a value per rank in each *_by_rank list, and a finite cp_balance >= 1. Exit 0 when it does.
"""
import json
import math
import os
import subprocess
import sys

KEYS = ("config", "cp_comm", "cp_prefetch", "bf16", "ms_per_step", "tokens_per_s", "peak_rss_mib_by_rank",
        "memory_estimate_activations_mib_by_rank",
        "memory_estimate_mib_by_rank", "allocator_peak_in_use_mib_by_rank",
        "allocator_peak_held_mib_by_rank", "attention_compute_s_by_rank", "cp_wait_s_by_rank",
        "cp_balance", "comm_wait_share_by_rank", "cp_wait_share_by_rank")


def main():
    separator = sys.argv.index("--")
    report, launch = sys.argv[1], sys.argv[separator + 1:]
    if os.path.exists(report):
        os.remove(report)
    done = subprocess.run(launch + ["--json", report], capture_output=True, text=True,
                          check=False)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        sys.exit(f"bench gpt: exit {done.returncode}")
    for words in (" ms/step, ", "max/min over the cp ranks "):
        if words not in done.stdout:
            sys.exit(f"bench gpt: no line with '{words}'")
    with open(report, encoding="utf-8") as file:
        lines = file.read().splitlines()
    if len(lines) != 1:
        sys.exit(f"{report}: {len(lines)} lines, expected 1")
    record = json.loads(lines[0])
    missing = [key for key in KEYS if key not in record]
    if missing:
        sys.exit(f"{report} lacks {', '.join(missing)}")
    ranks = record["config"]["world_size"]
    for key in KEYS:
        if key.endswith("_by_rank") and len(record[key]) != ranks:
            sys.exit(f"{report}: {key} has {len(record[key])} values for {ranks} ranks")
    balance = record["cp_balance"]
    if not isinstance(balance, (int, float)) or not math.isfinite(balance) or balance < 1:
        sys.exit(f"{report}: cp_balance {balance} is not a finite ratio >= 1")
    print(f"bench_gpt_json: {report} holds every key; cp_balance {balance:.3f}")


if __name__ == "__main__":
    main()
