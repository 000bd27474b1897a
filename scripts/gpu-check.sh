#!/usr/bin/env bash
# The device check, for a machine with an NVIDIA GPU (all ranks share GPU 0): builds with CUDA,
# runs the whole test suite (the CUDA tests run instead of skipping), then the real jobs with
# --device cuda on 1, 2, 4 and 8 ranks, and prints a PASS/FAIL summary. Exits non-zero on any
# failure. Needs the Debian packages of scripts/setup.sh already installed (a device machine may
# have no network).
#   bash scripts/gpu-check.sh             builds build/ here first (needs the -dev packages)
#   bash scripts/gpu-check.sh --no-build  checks an existing build/, one built elsewhere with
#                                         CUDA for this GPU's architecture (the runtime packages
#                                         suffice)
# MPITRON_GPU_CHECK_LOGS=DIR keeps each check's whole output in DIR (default: only the tails).
# MPITRON_GPU_CHECK_TEST_TIMEOUT=S limits each ctest test to S seconds (default 600).
set -uo pipefail
logs=${MPITRON_GPU_CHECK_LOGS:+$(realpath -m "$MPITRON_GPU_CHECK_LOGS")}
cd "$(dirname "$0")/.."
build=true
case "${1:-}" in
  "") ;;
  --no-build) build=false ;;
  *) echo "gpu-check: unknown argument '$1' (the one argument is --no-build)"; exit 2 ;;
esac
if [[ -z "$logs" ]]; then
  logs=$(mktemp -d)
  trap 'rm -rf "$logs"' EXIT
fi
mkdir -p "$logs" || exit 1
# ctest's files name the folder a build was configured in: a build made elsewhere must be here.
if ! $build && [[ "$(realpath -m "$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' \
      build/CMakeCache.txt 2>/dev/null)")" != "$(realpath -m build)" ]]; then
  echo "gpu-check: --no-build needs build/ configured at this path ($PWD/build)"
  exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}

failures=0
checks=0
check() {  # check NAME COMMAND...: runs COMMAND, prints PASS/FAIL with its wall time
  local name=$1 start=$SECONDS log
  shift
  checks=$((checks + 1))
  log="$logs/check_$(printf %02d "$checks").log"
  if "$@" >"$log" 2>&1; then
    echo "PASS  $name ($((SECONDS - start)) s)"
    tail -1 "$log" | sed 's/^/    | /'
  else
    echo "FAIL  $name ($((SECONDS - start)) s)"
    tail -20 "$log" | sed 's/^/    | /'
    failures=$((failures + 1))
  fi
}

nvidia-smi -L || { echo "gpu-check: no NVIDIA GPU visible"; exit 1; }
$build && check "build with CUDA" bash scripts/build.sh -DMPITRON_CUDA_ARCHITECTURES=native
check "test suite (CUDA tests included)" \
  ctest --test-dir build --output-on-failure -j "$(nproc)" \
  --timeout "${MPITRON_GPU_CHECK_TEST_TIMEOUT:-600}"
run() { mpirun -np "$1" --oversubscribe --bind-to none build/mpitron "${@:2}" --device cuda; }
# The CUDA module: --device auto finds the GPU through the driver and loads the module, so the
# CUDA runtime is in the ranks' maps (the suite's validate_cpu_maps_no_cuda shows that
# --device cpu maps neither the runtime nor cuBLAS, also here).
auto_loads_module() {
  local output
  output=$(LD_PRELOAD=$PWD/build/tests/app/libcuda_maps_probe.so mpirun -np 2 --oversubscribe \
    --bind-to none build/mpitron validate --device auto --log-dir /tmp/gpu-check-logs 2>&1)
  echo "$output"
  grep -q "mpitron: mapped .*libcudart" <<<"$output"
}
check "--device auto picks the GPU and loads the CUDA module" auto_loads_module
for topology in "1 1 1 1" "2 2 1 1" "2 1 2 1" "2 1 1 2" "4 2 2 1" "4 4 1 1" "4 1 4 1" "4 1 1 4" \
                "8 2 2 2"; do
  read -r np tp pp dp <<<"$topology"
  check "validate --device cuda on $np ranks (tp $tp, pp $pp, dp $dp)" \
    run "$np" validate --tp "$tp" --pp "$pp" --dp "$dp" --log-dir /tmp/gpu-check-logs
done
check "validate --device cuda, larger model (2, 2, 2)" \
  run 8 validate --tp 2 --pp 2 --dp 2 --hidden 256 --intermediate 1024 --batch 4 --seq 64 \
  --layers 8 --log-dir /tmp/gpu-check-logs
check "attention --device cuda --tp 4" run 4 attention --tp 4 --log-dir /tmp/gpu-check-logs
check "train-dp --device cuda on 4 ranks" run 4 train-dp --epochs 3 --log-dir /tmp/gpu-check-logs
for topology in "1 1 1 1" "4 2 2 1"; do
  read -r np tp pp dp <<<"$topology"
  check "bench --device cuda (tp $tp, pp $pp, dp $dp)" \
    run "$np" bench --tp "$tp" --pp "$pp" --dp "$dp" --log-dir /tmp/gpu-check-logs
done
check "bench --device cuda --recompute" run 1 bench --recompute --log-dir /tmp/gpu-check-logs
for topology in "1 1 1 1" "2 1 1 2" "4 2 2 1" "8 2 2 2"; do
  read -r np tp pp dp <<<"$topology"
  check "train --device cuda (tp $tp, pp $pp, dp $dp)" \
    run "$np" train --tp "$tp" --pp "$pp" --dp "$dp" --layers 2 --hidden 64 --heads 4 --seq 32 \
    --global-batch 16 --micro-batch 2 --steps 5 --log-dir /tmp/gpu-check-logs
done
check "train --device cuda --recompute" run 1 train --recompute --layers 2 --hidden 64 \
  --heads 4 --seq 32 --global-batch 16 --micro-batch 2 --steps 5 --log-dir /tmp/gpu-check-logs
for np in 2 4; do
  check "bench comm --device cuda on $np ranks (staged beside plain copies)" \
    run "$np" bench comm --json /tmp/gpu-check-bench-comm.jsonl --log-dir /tmp/gpu-check-logs
done
echo "gpu-check: $failures failed"
exit $((failures > 0))
