#!/usr/bin/env python3
"""Driver of the CLI tests of Hugging Face Llama folders (tests/app/hf_llama.cmake): runs
`mpitron` through the test launcher (checkpoint_cli.py's conventions: after `--` the launcher
command line with "{np}" for the rank count, ending with the mpitron executable; --work DIR is
made anew). Python standard library only.

  roundtrip --data DIR --work WORK
      For each folder of tools/make_golden_hf_llama.py under DIR (hf_llama_tied on tp 2 x pp 2,
      hf_llama_untied on tp 2, hf_llama_scaled with Llama 3's rope_scaling on pp 2):
      `train --init-from` the folder for one SGD step at --lr 1e-30 (which moves no weight by
      one rounding unit) with --save, `export --format hf` of that step; the export must hold
      the folder's tensors bit for bit (name, dtype F32, shape and bytes) and its config.json the
      same sizes, choices and rope_scaling; `train --init-from` the export and export again: the
      same model.safetensors and config.json byte for byte. Then `export --dtype bfloat16`:
      BF16 tensors, each the float32 value rounded to nearest even, and the bfloat16 folder
      starts a float32 run, which warns that its weights are widened. An export into a folder
      holding model.safetensors.index.json (whose shards would stay beside the new file, stale)
      is one line and exit code 2.
  eval --data DIR --work WORK
      `train --init-from` DIR/hf_llama_tied for one SGD step at --lr 1e-30 with --save, then
      `eval --init-from` the folder and `eval --load` the saved step (tp 2) on
      checkpoint_eval.txt: the same loss, bit for bit; and `eval --init-from` on pp 2 within
      1e-5.
Prints what it compared; exits 1 on any failure.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

from checkpoint_cli import fail, mpitron, read_safetensors
from gpt2_formats_cli import train_from

# The config.json fields that define the model (the others are informative).
MODEL_FIELDS = ["model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "intermediate_size", "vocab_size",
                "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
                "tie_word_embeddings", "hidden_act"]


def tensors(folder):
    """{name: (dtype, shape, bytes)} of a folder's model.safetensors."""
    header, body = read_safetensors(os.path.join(folder, "model.safetensors"))
    return {name: (e["dtype"], e["shape"], body[e["data_offsets"][0]:e["data_offsets"][1]])
            for name, e in header.items() if name != "__metadata__"}


def model_config(folder):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    return {field: config.get(field) for field in MODEL_FIELDS}


def export_hf(args, checkpoint, tag, *flags):
    out = os.path.join(args.work, tag)
    mpitron(args, [1, 1, 1], "export", "--load", checkpoint, "--format", "hf", "--out", out,
            *flags)
    return out


def bf16_round(bits):
    """The bfloat16 bits of float32 `bits`, to nearest, ties to even (finite values)."""
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


def expect_bf16_of(exported, f32):
    for name, (dtype, shape, data) in f32.items():
        got = exported[name]
        if got[0] != "BF16" or got[1] != shape:
            fail(f"bfloat16 export: {name} is {got[0]} {got[1]}, not BF16 {shape}")
        words = struct.unpack(f"<{len(data) // 4}I", data)
        if struct.unpack(f"<{len(words)}H", got[2]) != tuple(bf16_round(w) for w in words):
            fail(f"bfloat16 export: {name} is not its float32 values rounded to nearest even")


def roundtrip(args):
    for name, sizes in (("tied", [2, 2, 1]), ("untied", [2, 1, 1]), ("scaled", [1, 2, 1])):
        source = os.path.join(args.data, f"hf_llama_{name}")
        checkpoint = train_from(args, name, source, sizes, [], "llama")
        first = export_hf(args, checkpoint, f"{name}_out")
        if tensors(first) != tensors(source):
            fail(f"{first}: the tensors differ from {source}'s")
        if model_config(first) != model_config(source):
            fail(f"{first}/config.json: {model_config(first)} is not {model_config(source)}")
        again = export_hf(args, train_from(args, f"{name}_again", first, sizes, [], "llama"),
                          f"{name}_again_out")
        for file in ("model.safetensors", "config.json"):
            a, b = (open(os.path.join(f, file), "rb").read() for f in (first, again))
            if file == "model.safetensors":
                a, b = (read_safetensors(os.path.join(f, file)) for f in (first, again))
                a[0].pop("__metadata__"), b[0].pop("__metadata__")
            if a != b:
                fail(f"{again}/{file} differs from {first}/{file}")
        print(f"roundtrip {name}: init-from on tp {sizes[0]} pp {sizes[1]}, export --format hf: "
              f"the folder's tensors and config; again: the same files", flush=True)
        bf16 = export_hf(args, checkpoint, f"{name}_bf16", "--dtype", "bfloat16")
        expect_bf16_of(tensors(bf16), tensors(source))
        train_from(args, f"{name}_bf16", bf16, [1, 1, 1], [],
                   "stores bfloat16 weights: they are widened to float32 exactly")
        print(f"roundtrip {name}: export --dtype bfloat16 rounds every value to nearest even "
              f"and starts a float32 run, which warns of the widening", flush=True)
    sharded = os.path.join(args.work, "sharded")
    os.makedirs(sharded)
    with open(os.path.join(sharded, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": {}}, f)
    launch = [part.replace("{np}", "1") for part in args.launch]
    done = subprocess.run(launch + ["export", "--load", checkpoint, "--format", "hf", "--out",
                                    sharded, "--log-dir", os.path.join(args.work, "logs")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = done.stdout.decode("utf-8", "replace")
    if done.returncode != 2 or "holds model.safetensors.index.json (a sharded model)" not in output:
        fail(f"export into a sharded folder: exit {done.returncode}, output {output!r}")
    print("export into a folder with model.safetensors.index.json: one line, exit 2", flush=True)


def evaluate(args):
    source = os.path.join(args.data, "hf_llama_tied")
    checkpoint = train_from(args, "eval", source, [2, 1, 1], [], "llama")
    losses = []
    for weights, sizes in ((["--init-from", source], [2, 1, 1]),
                           (["--load", checkpoint], [2, 1, 1]),
                           (["--init-from", source], [1, 2, 1])):
        report = os.path.join(args.work, f"eval_{len(losses)}.json")
        mpitron(args, sizes, "eval", *weights, "--seq", "16", "--data",
                os.path.join(args.data, "checkpoint_eval.txt"), "--json", report)
        with open(report) as f:
            losses.append(json.load(f)["loss"])
    if losses[0] != losses[1]:
        fail(f"eval --init-from gives loss {losses[0]!r}, --load of its weights {losses[1]!r}")
    if abs(losses[2] - losses[0]) > 1e-5 * abs(losses[0]):
        fail(f"eval --init-from on pp 2 gives loss {losses[2]!r}, on tp 2 {losses[0]!r}")
    print(f"eval: --init-from hf_llama_tied and --load of the same weights give loss "
          f"{losses[0]!r}; pp 2 {losses[2]!r}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("action", choices=["roundtrip", "eval"])
    p.add_argument("--work", required=True)
    p.add_argument("--data", required=True)
    split = sys.argv.index("--") if "--" in sys.argv else len(sys.argv)
    args = p.parse_args(sys.argv[1:split])
    args.launch = sys.argv[split + 1:]
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    {"roundtrip": roundtrip, "eval": evaluate}[args.action](args)


if __name__ == "__main__":
    main()
