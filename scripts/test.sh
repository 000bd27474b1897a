#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (with the test tools), builds everything (libraries, the
# mpitron command, tests, benchmarks, the CUDA module when the toolkit is there) and runs the
# whole test suite (unit tests, multi-rank tests through mpiexec, and real `mpitron` runs).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --test
bash scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600
