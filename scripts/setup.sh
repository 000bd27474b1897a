#!/usr/bin/env bash
# Installs the Debian packages mpitron needs, only those that are missing (idempotent, and a
# no-op taking well under a second when everything is there). Needs root or sudo for apt-get.
#   bash scripts/setup.sh          what building and running the mpitron command needs
#   bash scripts/setup.sh --test   that, and what the test suite and the benchmarks need
set -euo pipefail

packages=(
  cmake g++ make
  openmpi-bin libopenmpi-dev
  libeigen3-dev
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcsv-dev
)
if [[ "${1:-}" == "--test" ]]; then
  packages+=(
    clang-format
    googletest libgtest-dev libgmock-dev libbenchmark-dev
    python3 python3-matplotlib  # matplotlib: tools/plot_metrics.py and its ctest
  )
fi
# Not python3-torch: only the PyTorch peers in tools/ need it (see tools/README.md).

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$package")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
