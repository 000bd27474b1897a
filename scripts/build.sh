#!/usr/bin/env bash
# Configures and builds mpitron into ./build (Release).
#   bash scripts/build.sh          everything: libraries, the mpitron command, tests, benchmarks and,
#                                  when the CUDA toolkit is at /usr/local/cuda, the CUDA module
#   bash scripts/build.sh --main   only the mpitron command and the libraries it links (the main
#                                  job); the CUDA module only when a GPU is visible
# Further arguments are passed to the CMake configure step.
set -euo pipefail
cd "$(dirname "$0")/.."

main=false
if [[ "${1:-}" == "--main" ]]; then
  main=true
  shift
fi
gpu_visible() { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }

cuda=AUTO
[[ -x /usr/local/cuda/bin/nvcc ]] && cuda=ON
if $main; then
  gpu_visible || cuda=OFF
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMPITRON_WITH_CUDA="$cuda" \
    -DMPITRON_BUILD_TESTS=OFF -DMPITRON_BUILD_BENCH=OFF "$@" >/dev/null
  cmake --build build -j "$(nproc)" --target mpitron
else
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMPITRON_WITH_CUDA="$cuda" \
    -DMPITRON_BUILD_TESTS=ON -DMPITRON_BUILD_BENCH=ON "$@" >/dev/null
  cmake --build build -j "$(nproc)"
fi
