"""Trains the same steps at --threads 1 and --threads 2 and requires identical losses.

Usage: threads_same_losses.py OUT_DIR -- LAUNCH... (the mpiexec prefix, mpitron and its train
arguments). Each run appends --threads N and --metrics OUT_DIR/threads_N.jsonl; every step's loss
and grad_norm (full double precision in the metrics file) and every val_loss must be equal, and
the start-up line must name the thread count ("1 thread)", or "2 threads;" before how idle
threads wait). Exit 0 when they are, 1 otherwise.
"""
import json
import os
import subprocess
import sys


def run(out_dir, launch, threads):
    metrics = os.path.join(out_dir, f"threads_{threads}.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    command = launch + ["--threads", str(threads), "--metrics", metrics]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        sys.exit(f"--threads {threads}: exit {done.returncode}")
    word = "thread)" if threads == 1 else "threads;"
    if f", {threads} {word}" not in done.stdout:
        sys.exit(f"--threads {threads}: the start-up line does not name {threads} {word}")
    records = []
    with open(metrics, encoding="utf-8") as file:
        for line in file:
            record = json.loads(line)
            if "step" in record:
                records.append({key: record.get(key) for key in ("step", "loss", "grad_norm",
                                                                 "val_loss")})
    return records


def main():
    separator = sys.argv.index("--")
    out_dir, launch = sys.argv[1], sys.argv[separator + 1:]
    os.makedirs(out_dir, exist_ok=True)
    one, two = run(out_dir, launch, 1), run(out_dir, launch, 2)
    if not one or len(one) != len(two):
        sys.exit(f"step records differ in number: {len(one)} at 1 thread, {len(two)} at 2")
    for a, b in zip(one, two):
        if a != b:
            sys.exit(f"1 thread {a} != 2 threads {b}")
    print(f"identical losses over {len(one)} records at --threads 1 and 2")


if __name__ == "__main__":
    main()
