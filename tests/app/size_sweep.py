#!/usr/bin/env python3
"""Every integer size flag of every subcommand at values near 2^31, 2^62 and 2^63-1
(tests/app/CMakeLists.txt): each run must end by itself within its time with exit code 0 (the
value is usable: a run that stops at once) or 2 with one line "rank 0: error: ..." naming the
flag, no crash (a signal, Open MPI's abort banner) and no negative number the user never gave.
The flags come from each subcommand's --help (the options of type INT), so a new size flag is
swept too. Python standard library only.

    size_sweep.py --mpitron PATH --checkpoint DIR --text FILE --tokenizer PATH --work DIR
                  [--jobs N] [--only SUBCOMMAND]

Prints one line per failing run and a summary; exits 1 when any run failed.
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys

VALUES = ["2147483648", "4611686018427387904", "9223372036854775807"]
TINY_GPT = ["--layers", "1", "--hidden", "16", "--heads", "2", "--seq", "8"]
NEGATIVE = re.compile(r"(?<![\w.])-\d")


def bases(args):
    """Each subcommand's words and a quick run's flags (the swept flag comes after them)."""
    tiny_mlp = ["--hidden", "8", "--intermediate", "16", "--batch", "2", "--seq", "2",
                "--layers", "1", "--micro-batches", "1"]
    return {
        "train": ["train", *TINY_GPT, "--global-batch", "2", "--micro-batch", "1", "--steps",
                  "1", "--stop-after", "1", "--eval-interval", "0", "--eval-iters", "1",
                  "--data", args.text],
        "train-dp": ["train-dp", "--samples", "8", "--features", "2", "--targets", "1",
                     "--hidden", "4", "--epochs", "1", "--batch-size", "4"],
        "bench": ["bench", *tiny_mlp, "--steps", "1", "--warmup", "0"],
        "validate": ["validate", *tiny_mlp],
        "attention": ["attention", "--embed", "8", "--heads", "2", "--batch", "1", "--seq", "4",
                      "--iterations", "1"],
        "eval": ["eval", "--load", args.checkpoint, "--data", args.text],
        "generate": ["generate", "--load", args.checkpoint, "--prompt", "a", "--tokens", "1"],
        "tokenize": ["tokenize", "--input", args.text, "--tokenizer", args.tokenizer,
                     "--output", os.path.join(args.work, "shards")],
        "bench comm": ["bench", "comm", "--max-bytes", "4096", "--max-iterations", "1"],
        "bench schedule": ["bench", "schedule"],
    }


def int_flags(mpitron, words):
    help_text = subprocess.run([mpitron, *words, "--help"], capture_output=True, text=True).stdout
    return re.findall(r"^\s+(--[a-z-]+) U?INT\b", help_text, re.MULTILINE)


def sweep_one(mpitron, words, flag, value, work):
    logs = [] if words[:2] == ["bench", "schedule"] else ["--log-dir", os.path.join(work, "logs")]
    command = [mpitron, *words, flag, value, *logs]
    shown = " ".join([os.path.basename(mpitron), *words[:2], "...", flag, value])
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return f"{shown}: still running after 30 s"
    output = done.stdout + done.stderr
    errors = [line for line in output.splitlines() if line.startswith("rank 0: error: ")]
    if done.returncode == 0 and not errors:
        return None
    if done.returncode != 2:
        tail = output.strip().splitlines()[-1:] or [""]
        return f"{shown}: exit code {done.returncode}: {tail[0][:160]}"
    if len(errors) != 1:
        return f"{shown}: {len(errors)} error lines of rank 0"
    if flag not in errors[0] and not (flag == "--seq" and "block size" in errors[0]):
        return f"{shown}: the error does not name {flag}: {errors[0]}"
    if NEGATIVE.search(errors[0]):
        return f"{shown}: a negative number in: {errors[0]}"
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mpitron", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--tokenizer", required=True, help="GPT-2's tokenizer files, for tokenize")
    p.add_argument("--work", required=True)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--only", help="sweep this subcommand alone")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    runs = []
    for name, words in bases(args).items():
        if args.only and name != args.only:
            continue
        command_words = name.split()
        for flag in int_flags(args.mpitron, command_words):
            runs += [(words, flag, value) for value in VALUES]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        failures = [f for f in pool.map(lambda r: sweep_one(args.mpitron, *r, args.work), runs)
                    if f]
    for failure in failures:
        print(f"FAIL: {failure}")
    print(f"size sweep: {len(runs) - len(failures)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
