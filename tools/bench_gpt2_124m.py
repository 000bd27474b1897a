#!/usr/bin/env python3
"""The GPT-2 124M table of docs/train.md: `mpitron train --model gpt2` on every topology of
--topologies at each --seq, from a random init and from an --init-from llm.c file, beside a
PyTorch peer (tools/torch_peer_gpt.py with --vocab 50257 --padded-vocab 50304 --gelu tanh, or
--init-from the same file) at the same sizes, launched by mpirun like mpitron, and, with --llmc
DIR, beside llm.c's CPU trainer (train_gpt2.c of a clone of the public project karpathy/llm.c)
from the same file at --llmc-threads OpenMP threads. Python standard library only; minutes per
row on a 2-core machine.

    tools/bench_gpt2_124m.py --mpitron build/mpitron --data SHARDS --init-from gpt2_124M.bin \\
        --peak-gflops 118 --cores 2 [--peer PATH] [--llmc DIR] [--steps 3] [--out table.md]

Each run takes --steps optimizer steps (the first one is a warm-up and is left out of ms/step):
seq 64 with a global batch of 8 (micro-batches of 4), seq 1024 with a global batch of 2
(micro-batches of 1). ms/step and tokens/s come from the --metrics file, GFLOP/s from the model
FLOPs of a step (nn::gpt_flops_per_token), MFU = GFLOP/s / (min(ranks, --cores) x
--peak-gflops), the peak RSS per rank and the memory estimate from train's --json report. The
peer needs python3-torch (tools/README.md). llm.c is timed by a small C driver this script
writes, which includes DIR/train_gpt2.c (its TESTING switch leaves out llm.c's main), builds with
llm.c's own flags (gcc -Ofast -march=native -fopenmp) and times gpt2_forward, gpt2_zero_grad,
gpt2_backward and gpt2_update (AdamW, lr 1e-4) on the same batches from the first train shard.
Prints a Markdown table (and writes it to --out).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SIZES = {64: (8, 4), 1024: (2, 1)}  # seq: (global batch, micro-batch)
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_mpi_yield_when_idle": "1"}


def topology(text):
    tp, pp, dp = (int(x) for x in text.split(","))
    return tp, pp, dp


def run(command, env=None):
    print("+", " ".join(command), file=sys.stderr, flush=True)
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, **MPI_ENV, **(env or {})})
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}):\n{done.stdout[-3000:]}")
    return done.stdout


def mpitron_row(args, sizes, seq, init_from, work):
    tp, pp, dp = sizes
    ranks = tp * pp * dp
    batch, micro = SIZES[seq]
    metrics, report = os.path.join(work, "m.jsonl"), os.path.join(work, "r.json")
    for path in (metrics, report):
        if os.path.exists(path):
            os.remove(path)
    command = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks), args.mpitron,
               "train", "--model", "gpt2", "--data", args.data, "--seq", str(seq),
               "--global-batch", str(batch), "--micro-batch", str(micro), "--steps",
               str(args.steps), "--warmup-steps", "1", "--lr", "1e-4", "--min-lr", "1e-5",
               "--eval-interval", "0", "--eval-iters", "1", "--tp", str(tp), "--pp", str(pp),
               "--dp", str(dp), "--metrics", metrics, "--json", report,
               "--log-dir", os.path.join(work, "logs")]
    if init_from:
        command += ["--init-from", args.init_from]
    run(command)
    with open(metrics) as f:
        steps = [json.loads(line) for line in f if '"ms"' in line]
    with open(report) as f:
        summary = json.load(f)
    timed = steps[1:] or steps
    ms = sum(s["ms"] for s in timed) / len(timed)
    gflops = sum(s["gflops"] for s in timed) / len(timed)
    return {"who": "mpitron", "sizes": sizes, "seq": seq, "init": "file" if init_from else "random",
            "ms": ms, "tokens_per_s": batch * seq / (ms / 1000), "gflops": gflops,
            "mfu": gflops / (min(ranks, args.cores) * args.peak_gflops),
            "rss": max(summary["peak_rss_mib_by_rank"]),
            "estimate": max(summary["memory_estimate_mib_by_rank"]),
            "loss": f"{steps[0]['loss']:.3f} -> {steps[-1]['loss']:.3f}"}


def peer_row(args, dp, seq, init_from, work):
    batch, _ = SIZES[seq]
    report = os.path.join(work, "peer.json")
    if os.path.exists(report):
        os.remove(report)
    command = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(dp),
               "/usr/bin/python3", args.peer, "--data", args.data_file, "--seq", str(seq),
               "--batch", str(batch // dp), "--steps", str(args.steps), "--skip", "1",
               "--warmup-steps", "1", "--lr", "1e-4", "--min-lr", "1e-5", "--gelu", "tanh",
               "--json", report]
    command += (["--init-from", args.init_from] if init_from else
                ["--vocab", "50257", "--padded-vocab", "50304", "--layers", "12", "--hidden",
                 "768", "--heads", "12", "--block-size", "1024"])
    run(command)
    with open(report) as f:
        line = json.loads(f.readlines()[-1])
    gflops = line["tokens_per_s"] * flops_per_token(seq) / 1e9
    return {"who": "PyTorch peer", "sizes": (1, 1, dp), "seq": seq,
            "init": "file" if init_from else "random", "ms": line["ms_per_step"],
            "tokens_per_s": line["tokens_per_s"], "gflops": gflops,
            "mfu": gflops / (min(dp, args.cores) * args.peak_gflops),
            "rss": max(line["peak_rss_mib_by_rank"]), "estimate": None,
            "loss": f"{line['loss']:.3f} (last)"}


LLMC_DRIVER = r"""
#define TESTING
#include "train_gpt2.c"
#include <sys/resource.h>

int main(int argc, char** argv) {
  GPT2 model;
  gpt2_build_from_checkpoint(&model, argv[1]);
  const int B = atoi(argv[3]), T = atoi(argv[4]), steps = atoi(argv[5]);
  DataLoader loader;
  dataloader_init(&loader, argv[2], B, T, 0, 1, 0);
  for (int step = 1; step <= steps; step++) {
    dataloader_next_batch(&loader);
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    gpt2_forward(&model, loader.inputs, loader.targets, B, T);
    gpt2_zero_grad(&model);
    gpt2_backward(&model);
    gpt2_update(&model, 1e-4f, 0.9f, 0.999f, 1e-8f, 0.0f, step);
    clock_gettime(CLOCK_MONOTONIC, &end);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("{\"loss\": %f, \"ms\": %f, \"peak_rss_mib\": %f}\n", model.mean_loss,
           (end.tv_sec - start.tv_sec) * 1e3 + (end.tv_nsec - start.tv_nsec) / 1e6,
           usage.ru_maxrss / 1024.0);
  }
  gpt2_free(&model);
  return 0;
}
"""


def llmc_row(args, threads, seq, work):
    batch, _ = SIZES[seq]
    driver = os.path.join(work, "llmc_driver")
    if not os.path.exists(driver):
        with open(driver + ".c", "w") as f:
            f.write(LLMC_DRIVER)
        run(["gcc", "-Ofast", "-march=native", "-fopenmp", "-I", args.llmc, "-o", driver,
             driver + ".c", "-lm"])
    out = run([driver, args.init_from, args.data_file, str(batch), str(seq), str(args.steps)],
              env={"OMP_NUM_THREADS": str(threads)})
    steps = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    timed = steps[1:] or steps
    ms = sum(s["ms"] for s in timed) / len(timed)
    gflops = batch * seq / (ms / 1000) * flops_per_token(seq) / 1e9
    return {"who": f"llm.c, {threads} thread{'s' if threads > 1 else ''}", "sizes": None,
            "seq": seq, "init": "file", "ms": ms, "tokens_per_s": batch * seq / (ms / 1000),
            "gflops": gflops, "mfu": gflops / (min(threads, args.cores) * args.peak_gflops),
            "rss": steps[-1]["peak_rss_mib"], "estimate": None,
            "loss": f"{steps[0]['loss']:.3f} -> {steps[-1]['loss']:.3f}"}


def flops_per_token(seq):
    """nn::gpt_flops_per_token for GPT-2 124M (vocab 50257, 12 layers, hidden 768)."""
    layers, c, vocab = 12, 768, 50257
    return 6 * (12 * layers * c * c + vocab * c) + 12 * layers * c * seq


def markdown(rows):
    lines = ["| run | (tp,pp,dp) | seq | init | ms/step | tokens/s | GFLOP/s | MFU | peak RSS "
             "MiB/rank | estimate MiB | loss |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        estimate = f"{r['estimate']:.0f}" if r["estimate"] is not None else "-"
        sizes = f"({','.join(map(str, r['sizes']))})" if r["sizes"] else "-"
        lines.append(f"| {r['who']} | {sizes} | {r['seq']} | "
                     f"{r['init']} | {r['ms']:.0f} | {r['tokens_per_s']:.0f} | "
                     f"{r['gflops']:.1f} | {100 * r['mfu']:.1f} % | {r['rss']:.0f} | {estimate} | "
                     f"{r['loss']} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mpitron", required=True)
    p.add_argument("--data", required=True, help="llm.c shards: a folder of *train*/*val* shards")
    p.add_argument("--init-from", required=True, help="a GPT-2 124M llm.c model file")
    p.add_argument("--peer", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "torch_peer_gpt.py"),
                   help="the PyTorch peer (default: tools/torch_peer_gpt.py); '' for no peer rows")
    p.add_argument("--peak-gflops", type=float, required=True, help="one core's FP32 peak")
    p.add_argument("--cores", type=int, required=True)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--seqs", default="64,1024")
    p.add_argument("--topologies", default="1,1,1;2,1,1;1,2,1;1,1,2;2,2,2")
    p.add_argument("--inits", default="random,file")
    p.add_argument("--peer-dps", default="1,2")
    p.add_argument("--llmc", help="a folder holding llm.c's train_gpt2.c and llmc/ (a clone of "
                   "karpathy/llm.c): adds its rows, from --init-from")
    p.add_argument("--llmc-threads", default="1,2")
    p.add_argument("--out")
    args = p.parse_args()
    train = sorted(f for f in os.listdir(args.data) if "train" in f and f.endswith(".bin"))
    args.data_file = os.path.join(args.data, train[0])
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for seq in (int(s) for s in args.seqs.split(",")):
            for init in args.inits.split(","):
                for sizes in (topology(t) for t in args.topologies.split(";")):
                    rows.append(mpitron_row(args, sizes, seq, init == "file", work))
                    print(markdown(rows[-1:]), file=sys.stderr, flush=True)
                if args.peer:
                    for dp in (int(d) for d in args.peer_dps.split(",") if d):
                        rows.append(peer_row(args, dp, seq, init == "file", work))
                        print(markdown(rows[-1:]), file=sys.stderr, flush=True)
            if args.llmc:
                for threads in (int(t) for t in args.llmc_threads.split(",")):
                    rows.append(llmc_row(args, threads, seq, work))
                    print(markdown(rows[-1:]), file=sys.stderr, flush=True)
    table = markdown(rows)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
