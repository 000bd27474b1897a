#!/usr/bin/env bash
# The start-up paths of train, eval, generate and export through src/app and src/nn
# (startup_path.py): builds SRC's mpitron into BUILD with every function of app and nn
# instrumented (-finstrument-functions), runs each command once on 1 rank with a small model,
# and prints each path's summary. Used to measure the layout (docs/architecture.md, "Start-up");
# not part of the test suite.
#   bash tools/startup_path/measure.sh [SRC [BUILD]]   (default: this checkout, /tmp/mpitron-trace)
# Each whole path is left in BUILD/paths/<command>.path, beside its trace.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "${1:-$here/../..}" && pwd)"
build="${2:-/tmp/mpitron-trace}"
mkdir -p "$build"
g++ -O2 -shared -fPIC -o "$build/libtrace_calls.so" "$here/trace_calls.cpp"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMPITRON_WITH_CUDA=OFF \
  -DMPITRON_BUILD_TESTS=OFF -DMPITRON_BUILD_BENCH=OFF -DMPITRON_UNITY_BUILD=OFF \
  "-DCMAKE_CXX_FLAGS=-g -finstrument-functions -finstrument-functions-exclude-file-list=/usr/,/src/kernels/,/src/autograd/,/src/comm/" \
  >/dev/null
cmake --build "$build" -j "$(nproc)" --target mpitron >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work="$(mktemp -d)"
out="$build/paths"
mkdir -p "$out"
trap 'rm -rf "$work"' EXIT
model=(--layers 2 --hidden 32 --heads 2 --seq 16)
trace() {  # NAME START END ARGS...: runs mpitron ARGS and prints the path's summary
  local name=$1 start=$2 end=$3
  shift 3
  # glibc defines the hooks as no-ops: the preloaded library's take their place.
  rm -f "$out/$name".trace.*
  MPITRON_TRACE_CALLS="$out/$name.trace" mpirun -np 1 env LD_PRELOAD="$build/libtrace_calls.so" \
    "$build/mpitron" "$@" --log-dir "$work/logs" >/dev/null
  echo "== $name"
  python3 "$here/startup_path.py" "$(ls "$out/$name".trace.* | head -1)" --src "$src/src" \
    --start "$start" --end "$end" >"$out/$name.path"
  tail -6 "$out/$name.path"
}
trace train 'app::run_train\(' 'GptTrainer::step\(' train "${model[@]}" --steps 1 \
  --global-batch 4 --micro-batch 2 --save "$work/ck" --metrics "$work/metrics.jsonl"
trace eval 'app::run_eval\(' 'GptTrainer::evaluate\(' eval --load "$work/ck" \
  --data /usr/share/common-licenses/GPL-3
trace generate 'app::run_generate\(' 'nn::generate' generate --load "$work/ck" --prompt "Th" --tokens 2
trace export 'app::run_export\(' 'nn::(write_|gpt_export|gpt_hf_export|gpt2_weights_of)' export --load "$work/ck" --out "$work/model.bin"
