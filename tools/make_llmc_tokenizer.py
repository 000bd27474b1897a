#!/usr/bin/env python3
"""Writes llm.c's gpt2_tokenizer.bin from OpenAI's GPT-2 encoder.json (python3 stdlib only).

The format (Karpathy's llm.c, as its train_gpt2.py writes it): a header of 256 little-endian
uint32 (magic 20240328, version 2, vocabulary size, end-of-text id, the rest 0), then for each
token id in order a uint8 byte length and the token's raw bytes. encoder.json spells tokens in
GPT-2's byte-to-unicode characters (encoder.py's bytes_to_unicode), turned back into bytes here;
"<|endoftext|>" is written as its text. mpitron's tokenizer tests load the result beside
encoder.json + vocab.bpe and require identical ids.

Usage: make_llmc_tokenizer.py ENCODER_JSON OUT_BIN
"""
import json
import struct
import sys

MAGIC = 20240328
VERSION = 2
END_OF_TEXT = "<|endoftext|>"


def byte_of_character():
    """GPT-2's stand-in character for each byte, inverted: character -> byte value."""
    printable = [b for b in range(256) if ord("!") <= b <= ord("~") or 0xA1 <= b <= 0xAC
                 or b >= 0xAE]
    characters = {b: chr(b) for b in printable}
    next_code = 0x100
    for b in range(256):
        if b not in characters:
            characters[b] = chr(next_code)
            next_code += 1
    return {c: b for b, c in characters.items()}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    encoder_path, out_path = sys.argv[1], sys.argv[2]
    with open(encoder_path, encoding="utf-8") as f:
        encoder = json.load(f)
    tokens = [None] * len(encoder)
    decode = byte_of_character()
    for text, token_id in encoder.items():
        if text == END_OF_TEXT:
            tokens[token_id] = text.encode("utf-8")
        else:
            tokens[token_id] = bytes(decode[c] for c in text)
    if any(t is None for t in tokens) or END_OF_TEXT not in encoder:
        sys.exit(f"{encoder_path}: ids are not 0..{len(tokens) - 1} with {END_OF_TEXT}")
    header = [0] * 256
    header[:4] = [MAGIC, VERSION, len(tokens), encoder[END_OF_TEXT]]
    with open(out_path, "wb") as f:
        f.write(struct.pack("<256I", *header))
        for token in tokens:
            f.write(struct.pack("<B", len(token)) + token)


if __name__ == "__main__":
    main()
