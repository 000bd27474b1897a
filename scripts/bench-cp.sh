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
# The timed runs go in --rounds rounds, each running every configuration once (so a burst of
# other load hits all of them alike); the tables give each figure's median over the rounds and,
# for the step times, the range. 2.5 to 3 minutes on a 2-core machine at the defaults. Expects a
# built build/mpitron (scripts/build.sh).
#   bash scripts/bench-cp.sh [--rounds N] [--steps N]   rounds (default 3); timed steps per run
#                                                       (default 3, after 1 warm-up)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 steps=3
while (($#)); do
  case $1 in
    --rounds) rounds=$2 ;;
    --steps) steps=$2 ;;
    *) echo "bench-cp.sh: unknown argument $1 (--rounds N, --steps N)" >&2; exit 2 ;;
  esac
  shift 2
done
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
    --json "$out/$name.jsonl" >>"$out/$name.txt"
}

echo "bench-cp: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $rounds" \
  "rounds; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for cp in 1 2 4; do
  run "base_cp$cp" "$cp" --cp "$cp" --seq 64 --steps 1
done
for ((round = 1; round <= rounds; round++)); do
  for cp in 1 2 4; do
    run "seq8192_cp$cp" "$cp" --cp "$cp" --seq 8192
  done
  for cp in 2 4; do
    run "seq8192_cp${cp}_no_prefetch" "$cp" --cp "$cp" --seq 8192 --no-cp-prefetch
  done
  run seq4096_np1_threads2 1 --seq 4096 --micro-batches 2 --threads 2
  run seq4096_np2_dp2 2 --dp 2 --seq 4096
  run seq4096_np2_cp2_ring 2 --cp 2 --seq 4096 --micro-batches 2
  run seq4096_np2_cp2_all_gather 2 --cp 2 --cp-comm all-gather --seq 4096 --micro-batches 2
  echo "bench-cp: load after round $round: $(cut -d' ' -f1-3 /proc/loadavg)"
done

python3 - "$out" <<'PY'
import json, os, statistics, sys

out = sys.argv[1]
def runs(name):
    with open(os.path.join(out, name + ".jsonl")) as f:
        return [json.loads(line) for line in f.read().splitlines()]
def median(name, figure):
    return statistics.median(figure(r) for r in runs(name))
def mean(xs):
    return sum(xs) / len(xs)
def ms(r):
    return r["ms_per_step"]

print("\n(a) seq 8192, layers 2, hidden 128, heads 4, vocab 256, 1 sequence per step: memory per "
      "rank (MiB, max over ranks; median over rounds)")
print(f"{'cp':>3} {'peak RSS':>9} {'estimate':>9} {'in use':>7} {'RSS seq 64':>11} "
      f"{'measured act.':>14} {'x cp':>6} {'estimated act.':>15}")
for cp in (1, 2, 4):
    name = f"seq8192_cp{cp}"
    rss = median(name, lambda r: max(r["peak_rss_mib_by_rank"]))
    base = max(runs(f"base_cp{cp}")[0]["peak_rss_mib_by_rank"])
    print(f"{cp:>3} {rss:>9.0f} {median(name, lambda r: max(r['memory_estimate_mib_by_rank'])):>9.0f} "
          f"{median(name, lambda r: max(r['allocator_peak_in_use_mib_by_rank'])):>7.0f} "
          f"{base:>11.0f} {rss - base:>14.0f} {(rss - base) * cp:>6.0f} "
          f"{median(name, lambda r: max(r['memory_estimate_activations_mib_by_rank'])):>15.0f}")

print("\n(b) balance at seq 8192 (ring, prefetch): attention compute s/step per cp rank, max/min")
for cp in (2, 4):
    for i, r in enumerate(runs(f"seq8192_cp{cp}")):
        times = ", ".join(f"{t:.3f}" for t in r["attention_compute_s_by_rank"])
        print(f"cp {cp}, round {i + 1}: {times}   max/min {r['cp_balance']:.3f}")

print("\n(c) the ring's overlap, seq 8192: share of the step waiting (mean over ranks; median "
      "over rounds)")
print(f"{'cp':>3} {'prefetch':>9} {'ms/step':>9} {'comm wait':>10} {'cp wait':>8} "
      f"{'cp wait s/step':>15}")
for cp in (2, 4):
    for name, label in ((f"seq8192_cp{cp}", "yes"), (f"seq8192_cp{cp}_no_prefetch", "no")):
        print(f"{cp:>3} {label:>9} {median(name, ms):>9.0f} "
              f"{100 * median(name, lambda r: mean(r['comm_wait_share_by_rank'])):>9.1f}% "
              f"{100 * median(name, lambda r: mean(r['cp_wait_share_by_rank'])):>7.1f}% "
              f"{median(name, lambda r: mean(r['cp_wait_s_by_rank'])):>15.3f}")

print("\n(d) seq 4096, 2 sequences per step on the same 2 cores (median over rounds; range)")
print(f"{'run':<30} {'ms/step':>9} {'range':>13} {'tokens/s':>9} {'comm wait':>10}")
for name, label in (("seq4096_np1_threads2", "cp 1, 1 rank x 2 threads"),
                    ("seq4096_np2_dp2", "cp 1, 2 ranks (dp 2)"),
                    ("seq4096_np2_cp2_ring", "cp 2, 2 ranks, ring"),
                    ("seq4096_np2_cp2_all_gather", "cp 2, 2 ranks, all-gather")):
    steps = [ms(r) for r in runs(name)]
    span = f"{min(steps):.0f}-{max(steps):.0f}"
    print(f"{label:<30} {median(name, ms):>9.0f} {span:>13} "
          f"{median(name, lambda r: r['tokens_per_s']):>9.0f} "
          f"{100 * median(name, lambda r: mean(r['comm_wait_share_by_rank'])):>9.1f}%")
print(f"\nreports and logs: {out}")
PY
