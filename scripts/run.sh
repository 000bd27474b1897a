#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds the mpitron command (only it: no tests, no
# benchmarks, the CUDA module only when a GPU is visible) and runs the main job: `mpitron
# validate` on 4 ranks (tensor parallel 2, pipeline parallel 2, data parallel 1).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/build.sh --main
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
mpirun -np 4 --oversubscribe build/mpitron validate --tp 2 --pp 2 --dp 1 "$@"
