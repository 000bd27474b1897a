#!/usr/bin/env python3
"""Driver of the CLI checkpoint tests (tests/app/checkpoint.cmake): runs `mpitron` through the
test launcher and compares the numbers it writes. Python standard library only.

Every subcommand but `damage` takes, after `--`, the launcher command line of the build with
"{np}" in place of the rank count, ending with the mpitron executable (`mpiexec -n {np} ...
mpitron`). Runs write into --work DIR (logs, metrics, checkpoints), which is made anew.

  resume   --from T,P,D[,C] --to T,P,D[,C] [--to-micro-batch M] [--recompute stopped|resumed]
           [--distributed-optimizer stopped|resumed] [--sequence-parallel stopped|resumed]
           [--bf16 all|resumed|not-resumed] [--llama] [--layers L] [--from-virtual-stages V]
           [--to-virtual-stages V] --rtol R --work DIR
      An uninterrupted 6-step run on --from; the same run stopped after step 3 with --save; then
      --load on --to (and --to-micro-batch). The losses of steps 4..6 and the final validation
      loss must equal the uninterrupted run's within relative R (0: exactly, bit for bit), those
      of steps 1..3 exactly. --recompute adds `--recompute` to the stopped or the resumed run
      only (the uninterrupted run never recomputes); --distributed-optimizer adds
      `--use-distributed-optimizer` the same way, and
      --sequence-parallel `--sequence-parallel`; --bf16 adds `--bf16` to every run, to the
      resumed one only, or to the two others only; --llama trains the llama family (2 key/value
      heads, an untied head) in every run. --layers sets the model's blocks (default 2);
      --from-virtual-stages gives the uninterrupted and the stopped run, --to-virtual-stages the
      resumed run --virtual-stages V (default 1).
  eval     --load DIR --data FILE [--seq S] --at T,P,D[,C] ... --rtol R --work DIR
           [--golden JSON] [--train-at T,P,D[,C]]
      `mpitron eval` on each --at topology; all agree with the first within R, and with the
      golden's PyTorch peer loss for this --seq within R. --train-at first trains 2 steps on that
      topology with --save into DIR and evaluates that checkpoint instead of --load's.
  eval-bf16 --data FILE --train-at T,P,D[,C] [--at T,P,D[,C] ...] --rtol R --work DIR
      `train --bf16 --gelu tanh` of 300 steps on --train-at over text FILE with --save; FILE's
      validation bytes (from 9/10 of its length on: TokenCorpus::from_file's split) written to
      a file; then `eval --bf16` of the checkpoint over them on --train-at must give the run's
      final val_loss bit for bit (the same trainer, windows and topology), and so must
      `eval --bf16 --split val` over FILE itself (not --split train); `eval` without --bf16
      must differ from it, and `eval --bf16` on each --at topology must agree within R. The
      checkpoint exported with --dtype bfloat16 and read back with --init-from must give the
      --load loss bit for bit under --bf16 (the parameters are the masters rounded to nearest
      even either way). `generate --bf16 --temperature 0` at the training tp (pp 1, dp 1): the
      same text twice and from the bfloat16 export, "bf16": true in --json. `eval` and
      `generate` of the checkpoint without --bf16 warn that it was trained with --bf16.
  generate --load DIR --work DIR
      The same prompt and seed on tp 1, 2 and 4 gives the same text (temperature 0.8 with top-k,
      and greedy), the same text twice, and another text for another seed.
  damage   --load DIR --work WORK
      Copies of checkpoint DIR with one defect each, as WORK/<case> (the ctest fixture of the
      bad-checkpoint tests): bad_header_json, bad_header_length, short_data, wrong_dtype, nan_value,
      wrong_shape, missing_shard, no_done, newer_without_done.
Prints what it compared and the largest relative difference; exits 1 on any failure.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

# Tiny training runs: about a second each even on 8 oversubscribed ranks.
TRAIN = ["--layers", "2", "--hidden", "32", "--heads", "4", "--seq", "16", "--global-batch", "8",
         "--warmup-steps", "1", "--eval-interval", "0", "--eval-iters", "4"]
STEPS, STOP_AFTER = 6, 3


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def topology(text):
    """tp,pp,dp or tp,pp,dp,cp; cp is 1 when left out."""
    sizes = [int(v) for v in text.split(",")]
    if len(sizes) not in (3, 4) or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"expected tp,pp,dp[,cp], got {text!r}")
    return sizes if len(sizes) == 4 else sizes + [1]


def mpitron(args, sizes, *command):
    """Runs `mpitron COMMAND --tp --pp --dp` (and --cp when sizes give a cp above 1) on
    tp*pp*dp*cp ranks; returns (stdout, stderr) bytes."""
    tp, pp, dp, cp = list(sizes) + [1] * (4 - len(sizes))
    launch = [part.replace("{np}", str(tp * pp * dp * cp)) for part in args.launch]
    full = launch + list(command) + ["--tp", str(tp), "--pp", str(pp), "--dp", str(dp),
                                     *(["--cp", str(cp)] if cp > 1 else []),
                                     "--log-dir", os.path.join(args.work, "logs")]
    print("+", " ".join(full), flush=True)
    done = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for stream in (done.stdout, done.stderr):
        print(stream.decode("utf-8", "replace"), end="", flush=True)
    if done.returncode != 0:
        fail(f"exit code {done.returncode}")
    return done.stdout, done.stderr


def metrics(path):
    """{step: loss} and the last validation loss of a --metrics file."""
    losses, val = {}, None
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if "loss" in record:
                losses[record["step"]] = record["loss"]
            elif "val_loss" in record:
                val = record["val_loss"]
    return losses, val


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


def compare(what, pairs, rtol):
    """Fails unless every (got, want) agrees within relative rtol (0: exactly)."""
    worst = max(relative(got, want) for got, want in pairs)
    exact = all(got == want for got, want in pairs)
    print(f"{what}: max relative difference {worst:.3e}{' (bit-identical)' if exact else ''}, "
          f"tolerance {rtol:g}", flush=True)
    if (rtol == 0 and not exact) or worst > rtol:
        fail(f"{what}: {pairs}")


def resume(args):
    def name(tag):
        return os.path.join(args.work, tag)

    checkpoint = name("checkpoint")
    base = ["train", *TRAIN, "--layers", str(args.layers), "--steps", str(STEPS), "--micro-batch",
            "2"]
    if args.bf16 in ("all", "not-resumed"):
        base.append("--bf16")
    if args.llama:
        base += ["--arch", "llama", "--kv-heads", "2", "--untie-embeddings"]
    source_stages = ["--virtual-stages", str(args.from_virtual_stages)]
    mpitron(args, args.source, *base, "--metrics", name("full.jsonl"), *source_stages)
    only = {"--recompute": args.recompute,
            "--use-distributed-optimizer": args.distributed_optimizer,
            "--sequence-parallel": args.sequence_parallel,
            "--bf16": "resumed" if args.bf16 == "resumed" else None}
    extra = {run: [flag for flag, on in only.items() if on == run]
             for run in ("stopped", "resumed")}
    mpitron(args, args.source, *base, "--stop-after", str(STOP_AFTER), "--save", checkpoint,
            "--metrics", name("stopped.jsonl"), *extra["stopped"], *source_stages)
    if sorted(os.listdir(checkpoint)) != ["latest", f"step_{STOP_AFTER}"]:
        fail(f"the stopped run wrote {sorted(os.listdir(checkpoint))}")
    if args.bf16 == "not-resumed":
        base.remove("--bf16")
    base[base.index("--micro-batch") + 1] = str(args.to_micro_batch or 2)
    log = b"".join(mpitron(args, args.target, *base, "--load", checkpoint, "--metrics",
                           name("resumed.jsonl"), *extra["resumed"], "--virtual-stages",
                           str(args.to_virtual_stages)))
    saved_by = "saved by tp={} pp={} dp={} cp={}".format(*args.source)
    if f"step {STOP_AFTER} ({saved_by})".encode() not in log:
        fail(f"the resumed run does not say it resumes from step {STOP_AFTER} ({saved_by})")
    full, full_val = metrics(name("full.jsonl"))
    stopped, _ = metrics(name("stopped.jsonl"))
    resumed, resumed_val = metrics(name("resumed.jsonl"))
    if sorted(stopped) != list(range(1, STOP_AFTER + 1)) or sorted(resumed) != list(
            range(STOP_AFTER + 1, STEPS + 1)):
        fail(f"steps: uninterrupted {sorted(full)}, stopped {sorted(stopped)}, "
             f"resumed {sorted(resumed)}")
    compare("steps 1..3 of the stopped run", [(stopped[s], full[s]) for s in stopped], 0)
    pairs = [(resumed[s], full[s]) for s in resumed] + [(resumed_val, full_val)]
    compare("resumed steps {}..{} and val_loss vs the uninterrupted run".format(
        STOP_AFTER + 1, STEPS), pairs, args.rtol)


def evaluate(args):
    load = args.load
    if args.train_at:
        load = os.path.join(args.work, "checkpoint")
        mpitron(args, args.train_at, "train", *TRAIN, "--micro-batch", "2", "--steps", "2",
                "--save", load)
    losses = []
    for sizes in args.at:
        report = os.path.join(args.work, "eval_{}_{}_{}_{}.json".format(*sizes))
        seq = ["--seq", str(args.seq)] if args.seq else []
        mpitron(args, sizes, "eval", "--load", load, "--data", args.data, *seq, "--json", report)
        with open(report) as f:
            losses.append(json.load(f)["loss"])
    compare(f"eval on {len(args.at)} topologies", [(x, losses[0]) for x in losses], args.rtol)
    if args.golden:
        with open(args.golden) as f:
            golden = json.load(f)
        want = [e for e in golden["peer_evals"] if e["seq"] == (args.seq or 16)]
        if len(want) != 1:
            fail(f"{args.golden} has no peer eval for seq {args.seq}")
        compare(f"eval vs the PyTorch peer's {want[0]['loss']!r}",
                [(x, want[0]["loss"]) for x in losses], args.rtol)


def eval_bf16(args):
    def path(name):
        return os.path.join(args.work, name)

    checkpoint = path("checkpoint")
    # The tanh GELU: what a GPT-2 file read with --init-from means (the export below). 300 steps
    # at lr 3e-2 (about 2 s): a model whose greedy text is not all spaces.
    mpitron(args, args.train_at, "train", *TRAIN, "--data", args.data, "--micro-batch", "2",
            "--steps", "300", "--lr", "3e-2", "--gelu", "tanh", "--bf16", "--save", checkpoint,
            "--metrics", path("train.jsonl"))
    _, val_loss = metrics(path("train.jsonl"))
    with open(args.data, "rb") as f:
        text = f.read()
    val = path("validation.txt")
    with open(val, "wb") as f:
        f.write(text[len(text) * 9 // 10:])

    def expect_bf16_warning(command, flags, out, err):
        """Without --bf16, a subcommand that --load's a bf16 run's checkpoint warns, once."""
        want = int("--bf16" not in flags and "--load" in flags)
        got = (out + err).count(b"was trained with --bf16")
        if got != want:
            fail(f"{command} {' '.join(flags)}: {got} warnings that the checkpoint was trained "
                 f"with --bf16, not {want}")

    def eval_report(sizes, name, *flags, data=val, split="all"):
        report = path(f"eval_{name}.json")
        out, err = mpitron(args, sizes, "eval", *flags, "--data", data, "--split", split,
                           "--json", report)
        expect_bf16_warning("eval", flags, out, err)
        with open(report) as f:
            got = json.load(f)
        if got.get("bf16") != ("--bf16" in flags) or got.get("split") != split:
            fail(f"eval {' '.join(flags)} --split {split}: --json's bf16 is "
                 f"{got.get('bf16')!r}, its split {got.get('split')!r}")
        return got["loss"]

    load = ["--load", checkpoint]
    bf16 = eval_report(args.train_at, "bf16", *load, "--bf16")
    plain = eval_report(args.train_at, "float32", *load)
    print(f"train --bf16 val_loss {val_loss!r}, eval --bf16 {bf16!r}, eval {plain!r}")
    compare("eval --bf16 vs train --bf16's val_loss on its topology", [(bf16, val_loss)], 0)
    # --split val of the whole file: the same windows as the file cut to them; --split train not.
    split_val = eval_report(args.train_at, "bf16_split_val", *load, "--bf16", data=args.data,
                            split="val")
    compare("eval --bf16 --split val vs train --bf16's val_loss", [(split_val, val_loss)], 0)
    split_train = eval_report(args.train_at, "bf16_split_train", *load, "--bf16",
                              data=args.data, split="train")
    if split_train == val_loss:
        fail(f"eval --split train gives the run's val_loss {val_loss!r} exactly")
    if plain == val_loss:
        fail(f"eval without --bf16 gives the bf16 run's val_loss {val_loss!r} exactly")
    others = [eval_report(sizes, "bf16_{}_{}_{}_{}".format(*sizes), *load, "--bf16")
              for sizes in args.at or []]
    if others:
        compare(f"eval --bf16 on {len(others)} other topologies", [(x, bf16) for x in others],
                args.rtol)
    exported = path("bf16.safetensors")
    mpitron(args, [1, 1, 1], "export", *load, "--dtype", "bfloat16", "--out", exported)
    init_from = ["--init-from", exported, "--heads", TRAIN[TRAIN.index("--heads") + 1]]
    compare("eval --bf16 of the bfloat16 export vs of the checkpoint",
            [(eval_report(args.train_at, "export_bf16", *init_from, "--bf16"), bf16)], 0)

    prompt = "The loss of "
    sizes = [args.train_at[0], 1, 1]
    texts = set()
    for run, source in enumerate([load, load, init_from]):
        report = path(f"generate_{run}.json")
        out, _ = mpitron(args, sizes, "generate", *source, "--bf16", "--prompt", prompt,
                         "--tokens", "40", "--temperature", "0", "--json", report)
        text = out[out.index(prompt.encode()):].split(b"\n")[0]
        if len(text) != len(prompt) + 40:
            fail(f"generate --bf16 printed {len(text)} bytes, not prompt + 40")
        with open(report) as f:
            if json.load(f).get("bf16") is not True:
                fail("generate --bf16 --json does not record \"bf16\": true")
        texts.add(text)
    if len(texts) != 1:
        fail(f"generate --bf16's greedy texts differ between runs or sources: {texts}")
    print(f"generate --bf16: the same greedy text twice and from the bfloat16 export: {texts}")
    out, err = mpitron(args, sizes, "generate", *load, "--prompt", prompt, "--tokens", "40",
                       "--temperature", "0")
    expect_bf16_warning("generate", load, out, err)
    plain = out[out.index(prompt.encode()):].split(b"\n")[0]
    print(f"generate without --bf16 (not compared: float32 may or may not pick other ids): "
          f"{plain}")


def generate(args):
    prompt = "The loss of "
    texts = {}
    for label, sampling in [("sampled", ["--temperature", "0.8", "--top-k", "20", "--seed", "7"]),
                            ("greedy", ["--temperature", "0"])]:
        for tp in (1, 2, 4, 2):
            out, _ = mpitron(args, [tp, 1, 1], "generate", "--load", args.load, "--prompt",
                             prompt, "--tokens", "40", *sampling)
            text = out[out.index(prompt.encode()):].split(b"\n")[0]
            if len(text) != len(prompt) + 40:
                fail(f"{label} text at tp {tp} has {len(text)} bytes, not prompt + 40")
            texts.setdefault(label, set()).add(text)
        if len(texts[label]) != 1:
            fail(f"{label} texts differ between topologies or runs: {texts[label]}")
        print(f"{label}: the same text on tp 1, 2, 4 and again on 2: {texts[label]}")
    out, _ = mpitron(args, [1, 1, 1], "generate", "--load", args.load, "--prompt", prompt,
                     "--tokens", "40", "--temperature", "0.8", "--top-k", "20", "--seed", "8")
    if out[out.index(prompt.encode()):].split(b"\n")[0] in texts["sampled"]:
        fail("seed 8 gives the same text as seed 7")


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def write_safetensors(path, header, body):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)


def as_float64(header, body, name):
    """The file with tensor `name` stored as F64 (values converted, offsets moved)."""
    if name not in header:
        fail(f"no tensor {name}")
    out, new_body = {}, b""
    for key, entry in sorted(header.items(), key=lambda kv: kv[1].get("data_offsets", [-1])[0]):
        if key == "__metadata__":
            out[key] = entry
            continue
        chunk = body[entry["data_offsets"][0]:entry["data_offsets"][1]]
        if key == name:
            values = struct.unpack(f"<{len(chunk) // 4}f", chunk)
            chunk = struct.pack(f"<{len(values)}d", *values)
            entry = dict(entry, dtype="F64")
        out[key] = dict(entry, data_offsets=[len(new_body), len(new_body) + len(chunk)])
        new_body += chunk
    return out, new_body


def damage(args):
    with open(os.path.join(args.load, "latest")) as f:
        step = f.read().strip()
    cases = ["bad_header_json", "bad_header_length", "short_data", "wrong_dtype", "wrong_shape",
             "missing_shard", "no_done", "newer_without_done", "nan_value", "overflow"]
    for case in cases:
        shutil.copytree(args.load, os.path.join(args.work, case))

    def shard(case, tp_rank, pp_rank):
        return os.path.join(args.work, case, step, f"shard_tp{tp_rank}_pp{pp_rank}.safetensors")

    with open(shard("bad_header_json", 0, 1), "r+b") as f:
        f.seek(8)
        f.write(b"#")
    with open(shard("bad_header_length", 1, 0), "r+b") as f:
        f.write(struct.pack("<Q", 1000000))
    with open(shard("short_data", 1, 1), "r+b") as f:
        f.truncate(os.path.getsize(shard("short_data", 1, 1)) - 4)
    header, body = read_safetensors(shard("wrong_dtype", 1, 0))
    write_safetensors(shard("wrong_dtype", 1, 0),
                      *as_float64(header, body, "transformer.h.0.mlp.c_fc.weight"))
    header, body = read_safetensors(shard("wrong_shape", 0, 0))
    rows, cols = header["transformer.wte.weight"]["shape"]
    header["transformer.wte.weight"]["shape"] = [rows // 2, cols * 2]
    write_safetensors(shard("wrong_shape", 0, 0), header, body)
    header, body = read_safetensors(shard("nan_value", 0, 1))
    begin = header["transformer.ln_f.weight"]["data_offsets"][0]
    body = body[:begin + 8] + struct.pack("<f", float("nan")) + body[begin + 12:]
    write_safetensors(shard("nan_value", 0, 1), header, body)
    # Finite, but the final LayerNorm's output overflows float32: every loss is NaN.
    for tp_rank in (0, 1):
        header, body = read_safetensors(shard("overflow", tp_rank, 1))
        for name in ("transformer.ln_f.weight", "transformer.ln_f.bias"):
            if name in header:
                begin, end = header[name]["data_offsets"]
                count = (end - begin) // 4
                body = body[:begin] + struct.pack(f"<{count}f", *[3e38] * count) + body[end:]
        write_safetensors(shard("overflow", tp_rank, 1), header, body)
    os.remove(shard("missing_shard", 1, 1))
    os.remove(os.path.join(args.work, "no_done", step, "DONE"))
    # A newer step whose save never finished (no DONE, a truncated shard) that latest names.
    newer = os.path.join(args.work, "newer_without_done")
    later = "step_{}".format(int(step.removeprefix("step_")) + 1)
    shutil.copytree(os.path.join(newer, step), os.path.join(newer, later))
    os.remove(os.path.join(newer, later, "DONE"))
    with open(os.path.join(newer, later, "shard_tp0_pp0.safetensors"), "r+b") as f:
        f.truncate(100)
    with open(os.path.join(newer, "latest"), "w") as f:
        f.write(later + "\n")
    print(f"damaged copies of {args.load} in {args.work}: {', '.join(cases)}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("action", choices=["resume", "eval", "eval-bf16", "generate", "damage"])
    p.add_argument("--work", required=True)
    p.add_argument("--from", dest="source", type=topology)
    p.add_argument("--to", dest="target", type=topology)
    p.add_argument("--to-micro-batch", type=int)
    p.add_argument("--recompute", choices=["stopped", "resumed"])
    p.add_argument("--distributed-optimizer", choices=["stopped", "resumed"])
    p.add_argument("--sequence-parallel", choices=["stopped", "resumed"])
    p.add_argument("--bf16", choices=["all", "resumed", "not-resumed"])
    p.add_argument("--llama", action="store_true")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--from-virtual-stages", type=int, default=1)
    p.add_argument("--to-virtual-stages", type=int, default=1)
    p.add_argument("--rtol", type=float, default=0.0)
    p.add_argument("--load")
    p.add_argument("--data")
    p.add_argument("--seq", type=int)
    p.add_argument("--at", type=topology, action="append")
    p.add_argument("--golden")
    p.add_argument("--train-at", type=topology)
    split = sys.argv.index("--") if "--" in sys.argv else len(sys.argv)
    args = p.parse_args(sys.argv[1:split])
    args.launch = sys.argv[split + 1:]
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    {"resume": resume, "eval": evaluate, "eval-bf16": eval_bf16, "generate": generate,
     "damage": damage}[args.action](args)


if __name__ == "__main__":
    main()
