#!/usr/bin/env python3
"""Driver of the graceful-stop tests (tests/app/train.cmake): a real signal to a real launcher
mid-run, waiting for a printed step rather than sleeping. Python standard library only.

    stop_signal.py --signal USR1 --ranks 2 --work DIR [--mid-save] -- <launcher> .../mpitron

1. `train` with --save and a constant learning rate runs until it prints a step line; the
   signal goes to the launcher's process (mpirun, or mpitron itself without a launcher). It must
   end with exit code 75 and one line "stopping at step k on SIG<NAME>: saved DIR/step_k", and
   DIR/step_k must be complete. With --mid-save every step is saved and each save pauses 2 s
   before completing (the test-only fault save-pauses-before-finish), so the signal, sent when
   a step line appears, arrives while that step is being saved: the save must still complete.
2. `train --load DIR` continues to step k + 3; an uninterrupted run of k + 3 steps must give the
   same losses for steps k+1..k+3, bit for bit (same topology).
Prints what it compared; exits 1 on any failure.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys

TRAIN = ["train", "--layers", "2", "--hidden", "32", "--heads", "4", "--seq", "16",
         "--global-batch", "8", "--micro-batch", "2", "--eval-interval", "0",
         "--lr", "1e-3", "--min-lr", "1e-3", "--warmup-steps", "0"]
STOPPED_EXIT_CODE = 75


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def command(args, *extra):
    launch = [part.replace("{np}", str(args.ranks)) for part in args.launch]
    return launch + TRAIN + ["--log-dir", os.path.join(args.work, "logs")] + list(extra)


def losses(path):
    with open(path) as f:
        return {r["step"]: r["loss"] for r in map(json.loads, f) if "loss" in r}


def run(full):
    print("+", " ".join(full), flush=True)
    done = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(done.stdout, end="", flush=True)
    if done.returncode != 0:
        fail(f"exit code {done.returncode}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--signal", required=True, help="USR1, TERM, INT, ...")
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--mid-save", action="store_true", help="signal while a step is being saved")
    p.add_argument("launch", nargs="+")
    args = p.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    save = os.path.join(args.work, "ckpt")
    stopped = os.path.join(args.work, "stopped.jsonl")

    saving = (["--save-interval", "1", "--inject-fault", "save-pauses-before-finish"]
              if args.mid_save else ["--save-interval", "1000000"])
    full = command(args, "--steps", "1000000", "--save", save, "--metrics", stopped, *saving)
    print("+", " ".join(full), flush=True)
    process = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = []
    for line in process.stdout:
        output.append(line)
        if re.search(r"step \d+/1000000 loss", line):
            process.send_signal(getattr(signal, "SIG" + args.signal))
            break
    output += process.stdout.readlines()
    code = process.wait()
    print("".join(output), end="", flush=True)
    if code != STOPPED_EXIT_CODE:
        fail(f"exit code {code}, expected {STOPPED_EXIT_CODE}")
    found = re.search(r"stopping at step (\d+) on SIG" + args.signal + r": saved (\S+)/step_\1\n",
                      "".join(output))
    if not found:
        fail(f"no line 'stopping at step k on SIG{args.signal}: saved .../step_k'")
    k = int(found.group(1))
    if not os.path.isfile(os.path.join(save, f"step_{k}", "DONE")):
        fail(f"{save}/step_{k} is not complete")

    resumed = os.path.join(args.work, "resumed.jsonl")
    full_run = os.path.join(args.work, "full.jsonl")
    run(command(args, "--steps", str(k + 3), "--load", save, "--metrics", resumed))
    run(command(args, "--steps", str(k + 3), "--metrics", full_run))
    got, expected = losses(resumed), losses(full_run)
    for step in range(k + 1, k + 4):
        if got.get(step) != expected.get(step):
            fail(f"step {step}: resumed loss {got.get(step)}, uninterrupted {expected.get(step)}")
    print(f"stop_signal: SIG{args.signal} stopped the run at step {k} with exit code 75; the "
          f"resumed steps {k + 1}..{k + 3} equal the uninterrupted run's bit for bit", flush=True)


if __name__ == "__main__":
    main()
