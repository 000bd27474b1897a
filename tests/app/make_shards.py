#!/usr/bin/env python3
"""Writes llm.c token shards for the train-on-shards ctests into OUT (python3 stdlib only).

    make_shards.py OUT

OUT/good/data_train_000000.bin and data_train_000001.bin (3000 tokens each) and
OUT/good/data_val_000000.bin (600): ids from the whole GPT-2 vocabulary [0, 50257) in a
repeating seeded pattern (so a model can learn it), the end-of-text id 50256 every 100 tokens.
And one broken shard per case: OUT/bad_magic.bin (magic 20240521), OUT/truncated.bin (the
header promises 100 tokens, the file holds 99), OUT/big_token.bin (token 50300 at position 7).
"""
import random
import struct
import sys
from pathlib import Path

MAGIC, VERSION = 20240520, 1


def write(path, tokens, magic=MAGIC, count=None, drop_bytes=0):
    header = [magic, VERSION, len(tokens) if count is None else count] + [0] * 253
    data = struct.pack("<256i", *header) + struct.pack(f"<{len(tokens)}H", *tokens)
    path.write_bytes(data[:len(data) - drop_bytes])


def pattern(count, seed):
    rng = random.Random(seed)
    phrase = [rng.randrange(50257) for _ in range(37)]
    return [50256 if i % 100 == 0 else phrase[i % 37] for i in range(count)]


def main():
    out = Path(sys.argv[1])
    (out / "good").mkdir(parents=True, exist_ok=True)
    write(out / "good" / "data_train_000000.bin", pattern(3000, 1))
    write(out / "good" / "data_train_000001.bin", pattern(3000, 1))
    write(out / "good" / "data_val_000000.bin", pattern(600, 1))
    write(out / "bad_magic.bin", pattern(100, 2), magic=MAGIC + 1)
    write(out / "truncated.bin", pattern(100, 2), drop_bytes=2)
    tokens = pattern(100, 2)
    tokens[7] = 50300
    write(out / "big_token.bin", tokens)


if __name__ == "__main__":
    main()
