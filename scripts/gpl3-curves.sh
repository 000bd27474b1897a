#!/usr/bin/env bash
# The training picture of docs/performance.md in one command: trains the GPT of docs/train.md's
# example on the GPL-3 text at (1,1,1) on one rank and at (2,2,2) on eight, with --metrics, then
# draws both runs with tools/plot_metrics.py (Debian's python3-matplotlib) into
# docs/train_gpl3.png. About 8 minutes on a 2-core machine. Expects a built build/mpitron
# (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
out=$(mktemp -d)
recipe=(--data /usr/share/common-licenses/GPL-3 --layers 4 --hidden 256 --heads 8 --seq 128
        --global-batch 32 --micro-batch 4 --steps 200 --lr 1e-3 --min-lr 1e-4 --warmup-steps 20
        --schedule 1f1b --log-dir "$out")
build/mpitron train "${recipe[@]}" --metrics "$out/run_111.jsonl"
mpirun -np 8 --oversubscribe build/mpitron train --tp 2 --pp 2 --dp 2 "${recipe[@]}" \
  --metrics "$out/run_222.jsonl"
/usr/bin/python3 tools/plot_metrics.py "$out/run_111.jsonl" "$out/run_222.jsonl" \
  -o docs/train_gpl3.png --title "mpitron train, GPL-3 text, 200 steps: (1,1,1) and (2,2,2)"
