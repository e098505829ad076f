#!/usr/bin/env bash
# Packs what a GPU machine needs to run grove's CUDA checks (scripts/cuda-check.sh) without
# building there: the grove and grove-net binaries and cuda_test from build/release, and the Debian libraries they
# link that a CUDA image may lack (ICU 72, cpp-httplib, Open MPI), xz-compressed into DIR/bundle.tar.xz.
# The CUDA runtime is linked statically; the driver is the machine's.
#
#   bash scripts/cuda-bundle.sh [DIR]     (default .devcarry, which .git/info/exclude should list)
set -euo pipefail
dir=${1:-.devcarry}
build=build/release
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib" "$dir"
strip -o "$stage/grove" "$build/tools/grove/grove"
strip -o "$stage/grove-net" "$build/tools/grove/grove-net"  # serve and pipe run there
strip -o "$stage/cuda_test" "$build/tests/cuda_test"
# Every library they link, except the C runtime the machine has its own newer copy of.
for bin in "$stage/grove" "$stage/grove-net" "$stage/cuda_test"; do
  ldd "$bin" | awk '/=> \//{print $3}'
done | sort -u | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
tar -C "$stage" -cJf "$dir/bundle.tar.xz" .
ls -la "$dir/bundle.tar.xz"
