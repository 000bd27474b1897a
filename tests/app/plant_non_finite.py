#!/usr/bin/env python3
"""Copies another tool's GPT-2 file with a NaN, an infinity and a negative infinity planted in
one tensor's first three values: an llm.c model file (its first parameter, wte) or a safetensors
file (the float32 tensor named by --tensor). With --huge, three finite values of 3.39e38 instead
(below bfloat16's rounding to infinity): weights a loader takes, whose values overflow float32.

Usage: plant_non_finite.py IN OUT [--tensor NAME] [--huge]
"""
import argparse
import json
import math
import os
import shutil
import struct

LLMC_MAGIC = 20240326
LLMC_HEADER_BYTES = 256 * 4
BAD = struct.pack("<3f", math.nan, math.inf, -math.inf)
HUGE = struct.pack("<3f", 3.39e38, 3.39e38, 3.39e38)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("out")
    parser.add_argument("--tensor", help="the safetensors tensor to damage")
    parser.add_argument("--huge", action="store_true", help="plant finite values of 3.39e38")
    args = parser.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    shutil.copyfile(args.source, args.out)
    with open(args.out, "r+b") as f:
        head = f.read(8)
        if struct.unpack("<i", head[:4])[0] == LLMC_MAGIC:
            f.seek(LLMC_HEADER_BYTES)
        else:
            (length,) = struct.unpack("<Q", head)
            entry = json.loads(f.read(length))[args.tensor]
            assert entry["dtype"] == "F32", entry
            f.seek(8 + length + entry["data_offsets"][0])
        f.write(HUGE if args.huge else BAD)


if __name__ == "__main__":
    main()
