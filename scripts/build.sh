#!/usr/bin/env bash
# Configures and builds mpitron into ./build (Release). CUDA code is compiled whenever the CUDA
# toolkit is at /usr/local/cuda (MPITRON_WITH_CUDA=ON), otherwise AUTO decides.
# Extra arguments are passed to the CMake configure step.
set -euo pipefail
cd "$(dirname "$0")/.."

cuda=AUTO
[[ -x /usr/local/cuda/bin/nvcc ]] && cuda=ON
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMPITRON_WITH_CUDA="$cuda" "$@" >/dev/null
cmake --build build -j "$(nproc)"
