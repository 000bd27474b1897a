#!/usr/bin/env python3
"""A fresh run into the --metrics file of a run killed before its first save (tests/app/
train.cmake). Python standard library, and tools/plot_metrics.py's reader.

    metrics_restart.py --work DIR -- .../mpitron

1. `train --metrics DIR/m.jsonl` (no --save), one rank started alone, is killed with SIGKILL once
   it has written 3 steps.
2. The same command with --steps 4 runs to the end: it must warn that the file held another
   run's records and moved them to DIR/m.jsonl.1.
3. DIR/m.jsonl must be one run (one config line, steps 1-4 once each) and DIR/m.jsonl.1 the dead
   run's records; tools/plot_metrics.py must read both.
Exits 1 with a FAIL line on any failure.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import plot_metrics  # noqa: E402

TRAIN = ["train", "--layers", "2", "--hidden", "32", "--heads", "4", "--seq", "16",
         "--global-batch", "8", "--micro-batch", "2", "--eval-interval", "0"]


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def steps(path):
    with open(path) as f:
        return [r["step"] for r in map(json.loads, f) if "loss" in r]


def configs(path):
    with open(path) as f:
        return sum(1 for r in map(json.loads, f) if "config" in r)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    p.add_argument("launch", nargs="+", help="the mpitron executable")
    args = p.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    metrics = os.path.join(args.work, "m.jsonl")
    command = args.launch + TRAIN + ["--log-dir", os.path.join(args.work, "logs"),
                                     "--metrics", metrics]

    dead = subprocess.Popen(command + ["--steps", "1000000"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not (os.path.exists(metrics) and len(steps(metrics)) >= 3):
        if dead.poll() is not None or time.monotonic() > deadline:
            fail("the first run ended or wrote no 3 steps in 60 s")
        time.sleep(0.1)
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    killed_steps = steps(metrics)
    print(f"killed the first run after steps {killed_steps}", flush=True)

    done = subprocess.run(command + ["--steps", "4"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    print(done.stdout, end="", flush=True)
    if done.returncode != 0:
        fail(f"the second run's exit code is {done.returncode}")
    aside = metrics + ".1"
    if f"--metrics {metrics} held another run's records: moved to {aside}" not in done.stdout:
        fail("no warning that the file was moved aside")
    if configs(metrics) != 1 or steps(metrics) != [1, 2, 3, 4]:
        fail(f"{metrics}: {configs(metrics)} config lines, steps {steps(metrics)}")
    if configs(aside) != 1 or steps(aside) != killed_steps:
        fail(f"{aside}: {configs(aside)} config lines, steps {steps(aside)}, not {killed_steps}")
    for path in (metrics, aside):
        plot_metrics.read_run(path)
    print(f"{metrics}: one run of 4 steps; {aside}: the killed run's {len(killed_steps)} steps")


if __name__ == "__main__":
    main()
