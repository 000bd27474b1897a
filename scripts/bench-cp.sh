#!/usr/bin/env bash
# Issue 45's measurements of context parallelism (docs/context-parallel.md#measuring), each a
# `mpitron bench gpt` run, printed as one table per question:
#   (a) peak RSS per rank at seq 8192 on a small GPT at cp 1, 2 and 4 (np = cp) beside the
#       estimate and the allocator's peak in use; "measured act." is the peak RSS less that of
#       the same run at seq 64, "x cp" that times cp (constant if it falls as 1/cp);
#   (b) the balance: each cp rank's attention compute seconds per step, max/min;
#   (c) the ring's overlap: the step's comm-wait share at cp 2 and 4, with and without prefetch;
#   (d) the step time at seq 4096 on the same 2 cores, 2 sequences per step everywhere: cp 1 on
#       1 rank with --threads 2, cp 1 on 2 ranks (dp 2, a sequence each), cp 2 on 2 ranks by the
#       ring and by all-gather (each rank half of both sequences).
# Ranks are not bound to cores (--bind-to none), so one rank with 2 threads gets both cores.
# About 5 minutes on a 2-core machine. Expects a built build/mpitron (scripts/build.sh).
#   bash scripts/bench-cp.sh [--steps N]     timed steps per run (default 3, after 1 warm-up)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=3
[[ "${1:-}" == "--steps" ]] && steps=$2
out=$(mktemp -d)
launch=(mpirun --oversubscribe --bind-to none)
[[ $(id -u) == 0 ]] && launch+=(--allow-run-as-root)
model=(--layers 2 --hidden 128 --heads 4 --vocab 256 --micro-batch 1 --warmup 1
       --steps "$steps" --log-dir "$out")

# NAME NP ARGS...: one bench gpt run appending its JSON line to $out/NAME.jsonl.
run() {
  local name=$1 np=$2
  shift 2
  echo "bench-cp: $name" >&2
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 \
    "${launch[@]}" -np "$np" build/mpitron bench gpt "${model[@]}" "$@" \
    --json "$out/$name.jsonl" >"$out/$name.txt"
}

echo "bench-cp: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores;" \
  "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for cp in 1 2 4; do
  run "base_cp$cp" "$cp" --cp "$cp" --seq 64 --steps 1
  run "seq8192_cp$cp" "$cp" --cp "$cp" --seq 8192
done
for cp in 2 4; do
  run "seq8192_cp${cp}_no_prefetch" "$cp" --cp "$cp" --seq 8192 --no-cp-prefetch
done
run seq4096_np1_threads2 1 --seq 4096 --micro-batches 2 --threads 2
run seq4096_np2_dp2 2 --dp 2 --seq 4096
run seq4096_np2_cp2_ring 2 --cp 2 --seq 4096 --micro-batches 2
run seq4096_np2_cp2_all_gather 2 --cp 2 --cp-comm all-gather --seq 4096 --micro-batches 2
echo "bench-cp: load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out" <<'PY'
import json, os, sys

out = sys.argv[1]
def get(name):
    with open(os.path.join(out, name + ".jsonl")) as f:
        return json.loads(f.read().splitlines()[-1])
def mean(xs):
    return sum(xs) / len(xs)

print("\n(a) seq 8192, layers 2, hidden 128, heads 4, vocab 256, 1 sequence per step: memory per "
      "rank (MiB, max over ranks)")
print(f"{'cp':>3} {'peak RSS':>9} {'estimate':>9} {'in use':>7} {'RSS seq 64':>11} "
      f"{'measured act.':>14} {'x cp':>6} {'estimated act.':>15}")
for cp in (1, 2, 4):
    r, b = get(f"seq8192_cp{cp}"), get(f"base_cp{cp}")
    rss, base = max(r["peak_rss_mib_by_rank"]), max(b["peak_rss_mib_by_rank"])
    print(f"{cp:>3} {rss:>9.0f} {max(r['memory_estimate_mib_by_rank']):>9.0f} "
          f"{max(r['allocator_peak_in_use_mib_by_rank']):>7.0f} {base:>11.0f} "
          f"{rss - base:>14.0f} {(rss - base) * cp:>6.0f} "
          f"{max(r['memory_estimate_activations_mib_by_rank']):>15.0f}")

print("\n(b) balance: attention compute s/step per cp rank (ring, prefetch), seq 8192")
for cp in (2, 4):
    r = get(f"seq8192_cp{cp}")
    times = ", ".join(f"{t:.3f}" for t in r["attention_compute_s_by_rank"])
    print(f"cp {cp}: {times}   max/min {r['cp_balance']:.3f}")

print("\n(c) the ring's overlap, seq 8192: share of the step waiting (mean over ranks)")
print(f"{'cp':>3} {'prefetch':>9} {'ms/step':>9} {'comm wait':>10} {'cp wait':>8} "
      f"{'cp wait s/step':>15}")
for cp in (2, 4):
    for name, label in ((f"seq8192_cp{cp}", "yes"), (f"seq8192_cp{cp}_no_prefetch", "no")):
        r = get(name)
        print(f"{cp:>3} {label:>9} {r['ms_per_step']:>9.0f} "
              f"{100 * mean(r['comm_wait_share_by_rank']):>9.1f}% "
              f"{100 * mean(r['cp_wait_share_by_rank']):>7.1f}% "
              f"{mean(r['cp_wait_s_by_rank']):>15.3f}")

print("\n(d) seq 4096, 2 sequences per step on the same 2 cores")
print(f"{'run':<34} {'ms/step':>9} {'tokens/s':>9} {'comm wait':>10}")
for name, label in (("seq4096_np1_threads2", "cp 1, 1 rank x 2 threads"),
                    ("seq4096_np2_dp2", "cp 1, 2 ranks (dp 2)"),
                    ("seq4096_np2_cp2_ring", "cp 2, 2 ranks, ring"),
                    ("seq4096_np2_cp2_all_gather", "cp 2, 2 ranks, all-gather")):
    r = get(name)
    print(f"{label:<34} {r['ms_per_step']:>9.0f} {r['tokens_per_s']:>9.0f} "
          f"{100 * mean(r['comm_wait_share_by_rank']):>9.1f}%")
print(f"\nreports and logs: {out}")
PY
