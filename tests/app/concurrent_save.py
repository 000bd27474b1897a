#!/usr/bin/env python3
"""Driver of the one-owner test (tests/app/train.cmake): two real runs into one --save folder.
Python standard library only.

    concurrent_save.py --work DIR -- .../mpitron

Run A trains into DIR/ckpt until it prints a step; run B, started then into the same folder,
must end at start with exit code 2 and one line naming A's lock (its host and pid); A is then
stopped with SIGTERM (exit 75, its step saved) and must leave no lock behind. Exits 1 on any
failure.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys

TRAIN = ["train", "--layers", "2", "--hidden", "32", "--heads", "4", "--seq", "16",
         "--global-batch", "8", "--micro-batch", "2", "--eval-interval", "0", "--steps", "1000000"]


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    p.add_argument("mpitron")
    args = p.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    save = os.path.join(args.work, "ckpt")
    run = [args.mpitron] + TRAIN + ["--save", save, "--save-interval", "1000000"]
    first = subprocess.Popen(run + ["--log-dir", os.path.join(args.work, "a")],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in first.stdout:
        if re.search(r"step \d+/1000000 loss", line):
            break
    second = subprocess.run(run + ["--log-dir", os.path.join(args.work, "b")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(second.stdout, end="", flush=True)
    first.send_signal(signal.SIGTERM)
    first.stdout.read()
    first_code = first.wait()
    if second.returncode != 2:
        fail(f"the second run exited with {second.returncode}, expected 2")
    expected = f"is in use by run [0-9a-f]{{16}} \\(host \\S+, pid {first.pid}\\)"
    if not re.search(expected, second.stdout):
        fail(f"the second run did not name the first's lock (pid {first.pid})")
    if first_code != 75:
        fail(f"the first run exited with {first_code} on SIGTERM, expected 75")
    if os.path.exists(os.path.join(save, ".lock")):
        fail("the first run left its lock behind")
    print(f"concurrent_save: the second run was refused, naming pid {first.pid}; the first "
          "stopped with 75 and released the folder", flush=True)


if __name__ == "__main__":
    main()
