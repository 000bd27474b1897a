#!/usr/bin/env python3
"""Driver of the CLI tests of other tools' GPT-2 formats (tests/app/gpt2_formats.cmake): runs
`mpitron` through the test launcher (checkpoint_cli.py's conventions: after `--` the launcher
command line with "{np}" for the rank count, ending with the mpitron executable; --work DIR is
made anew). Python standard library only.

  exports --load DIR --work WORK
      `mpitron export` of checkpoint DIR in each --format (safetensors, hf, llmc); this script
      reads the three files itself and checks that they hold the same numbers under each tool's
      names and layout: llm.c's header (magic, version 3, maxT, V, L, NH, C, Vp from the
      checkpoint's meta.json) and stacked arrays (a layer's qkvw rows q, k, v = nanoGPT's c_attn
      rows), Hugging Face's names without "transformer." and its Conv1D weights transposed.
  roundtrip --work WORK
      Writes llm.c model files here (maxT 16, L 2, NH 4, C 16; random float32 weights, none
      zero; V 300 with Vp 384, padding rows zero, and V = Vp = 384), `train --init-from`s a
      file for one SGD step at --lr 1e-30, which moves no weight by even one rounding unit, with
      --save, and exports that step in the file's format: the llm.c file on tp 2 x pp 2, whose
      padding is also 384; its run's Hugging Face export (300 wte rows, padded to 384 by the
      run) on pp 2; the unpadded file's run's nanoGPT export (whose 384 rows are all
      vocabulary) on tp 2. Each export must be the file its run started from, byte for byte (a
      safetensors file's header and data; its "__metadata__" names the checkpoint). And the
      padded run's nanoGPT export (384 rows) read back with --vocab 300 exports the first llm.c
      file again.
  generate --work WORK
      Writes an llm.c model file (maxT 16, V = Vp = 256: bytes, L 2, NH 4, C 16), `train
      --init-from`s it for one SGD step at --lr 1e-30 with --save, and runs greedy `generate` and
      `eval` of the file (--init-from) and of the saved step (--load) on tp 2: the same text and
      the same loss. So do the step's Hugging Face export (--init-from with --heads 4, which a
      safetensors file does not record) and its bfloat16 llm.c export (version 5) against a
      step saved from that file (its weights widened exactly), and the llm.c export of a --gelu
      erf step read with --gelu erf; without --gelu erf its loss differs. Losses are compared
      to the last digit (eval --json).
Prints what it compared; exits 1 on any failure.
"""
import argparse
import filecmp
import json
import math
import os
import random
import re
import shutil
import struct
import sys

from checkpoint_cli import fail, mpitron, read_safetensors

LLMC_MAGIC = 20240326
# llm.c's arrays after wte and wpe, each as the nanoGPT block tensor its layer slices are.
LLMC_BLOCK_ARRAYS = [("ln1w", "ln_1.weight"), ("ln1b", "ln_1.bias"),
                     ("qkvw", "attn.c_attn.weight"), ("qkvb", "attn.c_attn.bias"),
                     ("attprojw", "attn.c_proj.weight"), ("attprojb", "attn.c_proj.bias"),
                     ("ln2w", "ln_2.weight"), ("ln2b", "ln_2.bias"),
                     ("fcw", "mlp.c_fc.weight"), ("fcb", "mlp.c_fc.bias"),
                     ("fcprojw", "mlp.c_proj.weight"), ("fcprojb", "mlp.c_proj.bias")]
CONV1D = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}


def safetensors_values(path):
    """{name: (shape, float32 values)} of a safetensors file of F32 tensors."""
    header, body = read_safetensors(path)
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            fail(f"{path}: {name} is {entry['dtype']}, not F32")
        begin, end = entry["data_offsets"]
        out[name] = (entry["shape"], list(struct.unpack(f"<{(end - begin) // 4}f",
                                                        body[begin:end])))
    return out


def transpose(shape, values):
    rows, cols = shape
    return [cols, rows], [values[r * cols + c] for c in range(cols) for r in range(rows)]


def llmc_tensors(path, nano, layers):
    """The llm.c file's header and its arrays cut into nanoGPT's tensors (shapes from `nano`)."""
    with open(path, "rb") as f:
        data = f.read()
    header = list(struct.unpack("<256i", data[:1024]))
    values = struct.unpack(f"<{(len(data) - 1024) // 4}f", data[1024:])
    order = ["transformer.wte.weight", "transformer.wpe.weight"]
    for _, part in LLMC_BLOCK_ARRAYS:
        order += [f"transformer.h.{i}.{part}" for i in range(layers)]
    order += ["transformer.ln_f.weight", "transformer.ln_f.bias"]
    out, at = {}, 0
    for name in order:
        shape = nano[name][0]
        out[name] = (shape, list(values[at:at + math.prod(shape)]))
        at += math.prod(shape)
    if at != len(values):
        fail(f"{path}: {len(values) - at} values after the last array")
    return header, out


def exports(args):
    files = {}
    for form in ("safetensors", "hf", "llmc"):
        files[form] = os.path.join(args.work, f"model.{form}")
        mpitron(args, [1, 1, 1], "export", "--load", args.load, "--format", form,
                "--out", files[form])
    with open(os.path.join(args.load, "latest")) as f:
        meta_path = os.path.join(args.load, f.read().strip(), "meta.json")
    with open(meta_path) as f:
        config = json.load(f)["config"]
    nano = safetensors_values(files["safetensors"])
    hf = safetensors_values(files["hf"])
    layers, c = config["layers"], config["hidden"]
    header, llmc = llmc_tensors(files["llmc"], nano, layers)
    vp = nano["transformer.wte.weight"][0][0]
    want = [LLMC_MAGIC, 3, config["block_size"], config["vocab"], layers, config["heads"], c, vp]
    if header[:8] != want or any(header[8:]):
        fail(f"llm.c header {header[:8]}, expected {want} then zeros")
    if llmc != nano:
        fail("the llm.c file's arrays differ from the nanoGPT file's tensors")
    expected_hf = {}
    for name, (shape, values) in nano.items():
        key = name.removeprefix("transformer.")
        if key == "wte.weight":
            shape, values = [config["vocab"], c], values[:config["vocab"] * c]
        if key.split(".", 2)[-1] in CONV1D:
            shape, values = transpose(shape, values)
        expected_hf[key] = (shape, values)
    if hf != expected_hf:
        fail(f"the Hugging Face file differs: names {sorted(hf)} vs {sorted(expected_hf)}, or "
             f"values")
    print(f"exports: {len(nano)} tensors agree in the nanoGPT, Hugging Face and llm.c files "
          f"(header {header[:8]})", flush=True)


def write_llmc_sample(path, max_t, vocab, padded_vocab, layers, heads, c):
    """An llm.c model file of random weights (none zero) with zero padding rows in wte."""
    rng = random.Random(5)
    block = 12 * c * c + 13 * c
    count = padded_vocab * c + max_t * c + layers * block + 2 * c
    values = [rng.uniform(0.1, 1.0) * rng.choice((-1, 1)) for _ in range(count)]
    values[vocab * c:padded_vocab * c] = [0.0] * ((padded_vocab - vocab) * c)
    header = struct.pack("<256i", LLMC_MAGIC, 3, max_t, vocab, layers, heads, c, padded_vocab,
                         *([0] * 248))
    with open(path, "wb") as f:
        f.write(header + struct.pack(f"<{count}f", *values))


def same_content(a, b):
    """The same bytes; for safetensors files, but for "__metadata__" (export's "source")."""
    if a.endswith(".llmc"):
        return filecmp.cmp(a, b, shallow=False)
    (header_a, data_a), (header_b, data_b) = read_safetensors(a), read_safetensors(b)
    header_a.pop("__metadata__", None)
    header_b.pop("__metadata__", None)
    return header_a == header_b and data_a == data_b


def train_from(args, tag, source, sizes, flags, vocab):
    """`train --init-from source` for one SGD step at --lr 1e-30 with --save; its folder."""
    checkpoint = os.path.join(args.work, f"checkpoint_{tag}")
    log = b"".join(mpitron(args, sizes, "train", "--seq", "16", "--steps", "1", "--optimizer",
                           "sgd", "--lr", "1e-30", "--min-lr", "1e-30", "--warmup-steps", "0",
                           "--global-batch", "4", "--micro-batch", "2", "--eval-interval", "0",
                           "--eval-iters", "1", "--init-from", source, *flags,
                           "--save", checkpoint))
    if vocab.encode() not in log:
        fail(f"the run from {source} does not say {vocab}")
    return checkpoint


def export_to(args, checkpoint, form, tag):
    out = os.path.join(args.work, f"{tag}.{form}")
    mpitron(args, [1, 1, 1], "export", "--load", checkpoint, "--format", form, "--out", out)
    return out


def expect_same(form, source, out, sizes):
    if not same_content(source, out):
        fail(f"{out} differs from {source}")
    print(f"roundtrip {form}: train --init-from {os.path.basename(source)} on tp {sizes[0]} "
          f"pp {sizes[1]}, export --format {form}: the same content", flush=True)


def roundtrip(args):
    padded = os.path.join(args.work, "padded.llmc")
    write_llmc_sample(padded, 16, 300, 384, 2, 4, 16)
    checkpoint = train_from(args, "llmc", padded, [2, 2, 1], [], "vocab 300 (padded to 384)")
    expect_same("llmc", padded, export_to(args, checkpoint, "llmc", "llmc_out"), [2, 2, 1])
    # Hugging Face's wte holds the 300 vocabulary rows; the run pads them to 384.
    hf = export_to(args, checkpoint, "hf", "hf_in")
    checkpoint = train_from(args, "hf", hf, [1, 2, 1], ["--heads", "4"],
                            "vocab 300 (padded to 384)")
    expect_same("hf", hf, export_to(args, checkpoint, "hf", "hf_out"), [1, 2, 1])
    # The padded run's nanoGPT export holds all 384 rows; --vocab 300 reads the rows from 300 on
    # as padding again, so the run's llm.c export is the file the first run started from.
    nano_padded = export_to(args, checkpoint, "safetensors", "nanogpt_padded")
    checkpoint = train_from(args, "nanogpt_padded", nano_padded, [2, 1, 1],
                            ["--heads", "4", "--vocab", "300"], "vocab 300 (padded to 384)")
    expect_same("llmc", padded, export_to(args, checkpoint, "llmc", "llmc_again"), [2, 1, 1])
    # Every wte row of a nanoGPT file is vocabulary, so the round trip starts without padding.
    unpadded = os.path.join(args.work, "unpadded.llmc")
    write_llmc_sample(unpadded, 16, 384, 384, 2, 4, 16)
    checkpoint = train_from(args, "unpadded", unpadded, [1, 1, 1], [], "vocab 384, tanh GELU;")
    nano = export_to(args, checkpoint, "safetensors", "nanogpt_in")
    checkpoint = train_from(args, "safetensors", nano, [2, 1, 1], ["--heads", "4"],
                            "vocab 384, tanh GELU;")
    expect_same("safetensors", nano, export_to(args, checkpoint, "safetensors", "nanogpt_out"),
                [2, 1, 1])


def outputs(args, weights, data):
    """Greedy `generate` text and `eval` loss (its --json report's, every digit) of the weights
    of `weights` (flags) on tp 2."""
    out, _ = mpitron(args, [2, 1, 1], "generate", *weights, "--prompt", "GNU", "--tokens", "12",
                     "--temperature", "0")
    text = out.split(b"\n")[0]
    if len(text) != len("GNU") + 12:
        fail(f"generate {' '.join(weights)} gives {text!r}, not the prompt and 12 bytes")
    report = os.path.join(args.work, "eval.json")
    mpitron(args, [2, 1, 1], "eval", *weights, "--data", data, "--seq", "16", "--json", report)
    with open(report) as f:
        return text, repr(json.load(f)["loss"])


def expect_same_outputs(args, file_flags, checkpoint, data):
    got = outputs(args, file_flags, data)
    want = outputs(args, ["--load", checkpoint], data)
    if got != want:
        fail(f"{' '.join(file_flags)} gives text and loss {got}, --load of its weights {want}")
    print(f"generate and eval: {' '.join(file_flags)} and --load of the same weights give "
          f"{got[0]!r} and loss {got[1]}", flush=True)


def generate(args):
    source = os.path.join(args.work, "bytes.llmc")
    write_llmc_sample(source, 16, 256, 256, 2, 4, 16)
    data = os.path.join(args.work, "eval.txt")
    with open(data, "w") as f:
        f.write("GNU General Public License, version 3, of the Free Software Foundation. " * 4)
    checkpoint = train_from(args, "bytes", source, [2, 1, 1], [], "vocab 256, tanh GELU;")
    expect_same_outputs(args, ["--init-from", source], checkpoint, data)
    hf = export_to(args, checkpoint, "hf", "hf")
    expect_same_outputs(args, ["--init-from", hf, "--heads", "4"], checkpoint, data)
    bf16 = os.path.join(args.work, "bf16.llmc")
    mpitron(args, [1, 1, 1], "export", "--load", checkpoint, "--format", "llmc", "--dtype",
            "bfloat16", "--out", bf16)
    widened = train_from(args, "bf16", bf16, [2, 1, 1], [], "vocab 256, tanh GELU;")
    expect_same_outputs(args, ["--init-from", bf16], widened, data)
    # An erf-GELU run's export reads back with --gelu erf; without it, as GPT-2's tanh GELU, its
    # loss moves.
    erf = train_from(args, "erf", source, [2, 1, 1], ["--gelu", "erf"], "vocab 256;")
    erf_file = export_to(args, erf, "llmc", "erf")
    expect_same_outputs(args, ["--init-from", erf_file, "--gelu", "erf"], erf, data)
    as_tanh = outputs(args, ["--init-from", erf_file], data)
    if as_tanh[1] == outputs(args, ["--load", erf], data)[1]:
        fail(f"--init-from {erf_file} without --gelu erf has the erf model's loss {as_tanh[1]}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("action", choices=["exports", "roundtrip", "generate"])
    p.add_argument("--work", required=True)
    p.add_argument("--load")
    split = sys.argv.index("--") if "--" in sys.argv else len(sys.argv)
    args = p.parse_args(sys.argv[1:split])
    args.launch = sys.argv[split + 1:]
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    {"exports": exports, "roundtrip": roundtrip, "generate": generate}[args.action](args)


if __name__ == "__main__":
    main()
