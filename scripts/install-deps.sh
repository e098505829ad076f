#!/usr/bin/env bash
# Installs what grove needs to build and test on Debian 12 (bookworm). Safe to run again.
# Each package and why it is there: docs/design.md, "Dependencies".
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config   # toolchain
  libicu-dev                         # Unicode categories for the BPE pre-tokenizers
  libcli11-dev                       # command-line parsing of the grove CLI
  nlohmann-json3-dev                 # JSON output of bench/calibration files
  libgtest-dev libgmock-dev          # the test suite
  libbenchmark-dev                   # kernel micro-benchmarks
  libopenblas-dev                    # f32 matrix products of the trainer (optional: built-in fallback)
  libcpp-httplib-dev                 # HTTP server of grove serve (and the client of its tests)
  libopenmpi-dev openmpi-bin         # grove pipe's ranks as MPI processes (mpirun), across hosts
  chromium                           # the tree view's page test (headless; a screenshot in build/)
  clang-format                       # the format check the test suite runs (.clang-format)
  clang libclang-rt-14-dev           # libFuzzer (the fuzz preset CI runs; only recommended by clang)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
