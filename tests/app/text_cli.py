#!/usr/bin/env python3
"""Driver of the CLI tests of `eval` and `generate` on text with GPT-2's tokenizer
(tests/app/text_cli.cmake). Runs mpitron through the test launcher (checkpoint_cli.py's
conventions: after `--` the launcher command line with "{np}" for the rank count, ending with the
mpitron executable; --work DIR is made anew). Python standard library only.

  text_cli.py --tokenizer DIR --text FILE --work WORK -- LAUNCH...

DIR holds GPT-2's encoder.json and vocab.bpe. The steps:
1. `tokenize` FILE into one train shard (--val-fraction 0), then `train` a small vocab-50257
   model on it for a few steps with --save.
2. `eval --data FILE --tokenizer DIR` on (1,1,1) and (2,1,1) gives the loss of `eval` on the
   shard: the same windows of the same tokens, exactly on one rank and within 1e-5 relative
   (float32 sums in another order) on tp 2.
3. `generate --tokenizer DIR` (greedy, then sampled) prints the prompt and then text that is the
   decoding, with encoder.json read here, of the ids its --json lists; the ids are the same on
   tp 1 and tp 2; the prompt (FILE's first line) is encoded as the shard begins.
4. A model whose vocabulary (50304) reaches past the tokenizer's, trained only on ids 50257 and
   up, still generates ids below 50257 with the tokenizer (ids it cannot decode are never
   drawn); a model trained mostly on end-of-texts stops at the end-of-text it draws after the
   prompt "hello" and prints "hello" alone.
5. Bad input, on both ranks of tp 2, one line and exit code 2: generate from a vocab-50257
   checkpoint without --tokenizer; eval --tokenizer on a shard; generate --tokenizer from a byte
   model (vocab 256, fewer ids than the tokenizer's).
Prints what it compared; exits 1 on any failure.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

from checkpoint_cli import fail, mpitron

TRAIN = ["--layers", "1", "--hidden", "32", "--heads", "2", "--seq", "32", "--global-batch", "8",
         "--micro-batch", "8", "--lr", "1e-2", "--warmup-steps", "2", "--eval-interval", "0",
         "--eval-iters", "2"]
SHARD_MAGIC, EOT, HELLO = 20240520, 50256, 31373  # HELLO: GPT-2's id of "hello"


def byte_decoder():
    """GPT-2's printable stand-in character of each byte, inverted: {character: byte}."""
    kept = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + \
        list(range(0xAE, 0xFF + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in kept:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


def decoder(tokenizer_dir):
    """ids -> bytes with encoder.json."""
    with open(os.path.join(tokenizer_dir, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    pieces = {i: t for t, i in encoder.items()}
    to_byte = byte_decoder()
    return lambda ids: bytes(to_byte[c] for i in ids for c in pieces[i])


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    header = struct.unpack("<256i", data[:1024])
    return list(struct.unpack(f"<{header[2]}H", data[1024:]))


def write_shard(path, tokens):
    header = [SHARD_MAGIC, 1, len(tokens)] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header) + struct.pack(f"<{len(tokens)}H", *tokens))


def eval_loss(args, sizes, name, *flags):
    out = os.path.join(args.work, f"eval_{name}.json")
    mpitron(args, sizes, "eval", "--load", os.path.join(args.work, "ckpt"), "--json", out, *flags)
    with open(out) as f:
        return json.load(f)


def generate(args, sizes, name, ckpt, *flags):
    """(stdout bytes without the final newline, the --json report)."""
    out = os.path.join(args.work, f"generate_{name}.json")
    stdout, _ = mpitron(args, sizes, "generate", "--load", ckpt, "--tokenizer", args.tokenizer,
                        "--json", out, *flags)
    with open(out) as f:
        return stdout.removesuffix(b"\n"), json.load(f)


def check_eval(args):
    shard_loss = eval_loss(args, (1, 1, 1), "shard", "--data", os.path.join(args.work, "shards"))
    for sizes, rtol in (((1, 1, 1), 0.0), ((2, 1, 1), 1e-5)):
        name = "text_tp{}".format(sizes[0])
        got = eval_loss(args, sizes, name, "--data", args.text, "--tokenizer", args.tokenizer)
        if "bits_per_token" not in got or got["windows"] != shard_loss["windows"]:
            fail(f"eval on text at {sizes}: {got}, on the shard: {shard_loss}")
        diff = abs(got["loss"] - shard_loss["loss"]) / abs(shard_loss["loss"])
        print(f"eval {sizes} on text {got['loss']!r} vs shard {shard_loss['loss']!r}: "
              f"relative {diff:.2e} (at most {rtol})")
        if diff > rtol:
            fail("eval on text with --tokenizer differs from eval on its shard")


def check_generate(args, tokens):
    decode = decoder(args.tokenizer)
    with open(args.text, "rb") as f:
        prompt = f.read().split(b"\n")[0].decode()
    runs = {}
    for sizes in ((1, 1, 1), (2, 1, 1)):
        for mode, flags in (("greedy", ["--temperature", "0"]),
                            ("sampled", ["--temperature", "0.9", "--top-k", "50"])):
            text, report = generate(args, sizes, f"{mode}_tp{sizes[0]}", args.ckpt, "--prompt",
                                    prompt, "--tokens", "12", "--seed", "3", *flags)
            ids = report["ids"]
            # An end-of-text drawn ends the sample early and is not printed.
            shown = ids[:-1] if ids[-1] == EOT else ids
            if len(ids) > report["prompt_tokens"] + 12 or decode(shown) != text or (
                    len(ids) < report["prompt_tokens"] + 12 and ids[-1] != EOT):
                fail(f"generate {mode} at {sizes}: printed {text!r}, ids {ids} decode to "
                     f"{decode(ids)!r}")
            runs.setdefault(mode, []).append(ids)
            prompt_length = report["prompt_tokens"]
    for mode, ids in runs.items():
        if ids[0] != ids[1]:
            fail(f"generate {mode}: tp 1 drew {ids[0]}, tp 2 drew {ids[1]}")
    # The prompt is the text's first line: its ids open the shard, after the end-of-text (which
    # GPT-2's tokenizer does not put before a prompt).
    prompt_ids = runs["greedy"][0][:prompt_length]
    if prompt_ids != tokens[1:1 + len(prompt_ids)] or decode(prompt_ids) != prompt.encode():
        fail(f"the prompt's ids {prompt_ids} are not the shard's first ids "
             f"{tokens[1:1 + len(prompt_ids)]} or do not decode to {prompt!r}")
    print(f"generate: prompt {prompt!r} as {prompt_ids}; the same ids on tp 1 and 2, greedy "
          f"{runs['greedy'][0][prompt_length:]} and sampled {runs['sampled'][0][prompt_length:]}")


def check_stop_at_end_of_text(args):
    """A model trained on "hello" after three end-of-texts, prompted with "hello", draws the
    end-of-text greedily (the likelier token even to a model that learned only frequencies) and
    stops there: one id after the prompt, and "hello" printed alone."""
    shards = os.path.join(args.work, "hello")
    os.makedirs(shards)
    write_shard(os.path.join(shards, "hello_train_000000.bin"), [EOT, EOT, EOT, HELLO] * 1000)
    ckpt = os.path.join(args.work, "ckpt_hello")
    mpitron(args, (1, 1, 1), "train", "--data", shards, "--vocab", "50257", "--steps", "20",
            "--save", ckpt, *TRAIN)
    text, report = generate(args, (1, 1, 1), "hello", ckpt, "--prompt", "hello", "--tokens",
                            "20", "--temperature", "0")
    if report["ids"] != [HELLO, EOT] or text != b"hello":
        fail(f"generate after 'hello' drew {report['ids']} and printed {text!r}: expected "
             f"[{HELLO}, {EOT}] and b'hello'")
    print(f"generate stopped at the end-of-text: ids {report['ids']}, printed {text!r}")


def check_vocabulary_past_the_tokenizer(args):
    shards = os.path.join(args.work, "past")
    os.makedirs(shards)
    write_shard(os.path.join(shards, "past_train_000000.bin"),
                [50257 + (i * 7) % 47 for i in range(4000)])
    ckpt = os.path.join(args.work, "ckpt_past")
    mpitron(args, (1, 1, 1), "train", "--data", shards, "--vocab", "50304", "--steps", "20",
            "--save", ckpt, *TRAIN)
    for mode, flags in (("greedy", ["--temperature", "0"]), ("hot", ["--temperature", "2"])):
        _, report = generate(args, (1, 1, 1), f"past_{mode}", ckpt, "--prompt", "hello",
                             "--tokens", "20", *flags)
        drawn = report["ids"][report["prompt_tokens"]:]
        if max(drawn) >= 50257:
            fail(f"generate {mode} drew ids outside the tokenizer: {drawn}")
        print(f"generate {mode} with a vocab-50304 model trained on ids >= 50257 drew {drawn}")


def expect_error(args, message, *command):
    """Runs COMMAND on tp 2; both ranks must print `rank N: error: ...message...`, exit code 2."""
    launch = [part.replace("{np}", "2") for part in args.launch]
    full = launch + list(command) + ["--tp", "2", "--log-dir", os.path.join(args.work, "logs")]
    print("+", " ".join(full), flush=True)
    done = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for rank in (0, 1):
        if not any(line.startswith(f"rank {rank}: error: ") and message in line
                   for line in done.stdout.splitlines()):
            fail(f"rank {rank} did not print the error {message!r}: {done.stdout}")
    if done.returncode != 2:
        fail(f"exit code {done.returncode}, expected 2")
    print(f"refused with {message!r}")


def check_bad_input(args):
    expect_error(args, "the model's vocab 50257 is not bytes: give the --tokenizer it was "
                 "trained with", "generate", "--load", args.ckpt, "--prompt", "x")
    expect_error(args, "is llm.c token shards, already tokens: --tokenizer encodes a text file",
                 "eval", "--load", args.ckpt, "--data", os.path.join(args.work, "shards"),
                 "--tokenizer", args.tokenizer)
    byte_ckpt = os.path.join(args.work, "ckpt_bytes")
    mpitron(args, (1, 1, 1), "train", "--data", args.text, "--steps", "1", "--save", byte_ckpt,
            *TRAIN)
    expect_error(args, "has 50257 ids, more than the model's vocab 256", "generate",
                 "--load", byte_ckpt, "--prompt", "x", "--tokenizer", args.tokenizer)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--work", required=True)
    split = sys.argv.index("--")
    args = p.parse_args(sys.argv[1:split])
    args.launch = sys.argv[split + 1:]
    if not os.path.isfile(os.path.join(args.tokenizer, "encoder.json")):
        print(f"skipped: no GPT-2 tokenizer in {args.tokenizer} (scripts/setup.sh --test)")
        sys.exit(77)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    shards = os.path.join(args.work, "shards")
    # tokenize takes no --tp/--pp/--dp: one rank of the launcher, without mpitron()'s flags.
    command = [part.replace("{np}", "1") for part in args.launch] + [
        "tokenize", "--tokenizer", args.tokenizer, "--input", args.text, "--output", shards,
        "--val-fraction", "0", "--name", "text", "--log-dir", os.path.join(args.work, "logs")]
    print("+", " ".join(command), flush=True)
    if subprocess.run(command).returncode != 0:
        fail("tokenize failed")
    tokens = read_shard(os.path.join(shards, "text_train_000000.bin"))
    args.ckpt = os.path.join(args.work, "ckpt")
    mpitron(args, (1, 1, 1), "train", "--data", shards, "--vocab", "50257", "--steps", "6",
            "--save", args.ckpt, *TRAIN)
    check_eval(args)
    check_generate(args, tokens)
    check_vocabulary_past_the_tokenizer(args)
    check_stop_at_end_of_text(args)
    check_bad_input(args)
    print("all text checks passed")


if __name__ == "__main__":
    main()
