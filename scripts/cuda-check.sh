#!/usr/bin/env bash
# Every GPU check and measurement of docs/cuda.md in one run on a machine with an NVIDIA GPU,
# from a bundle made by scripts/cuda-bundle.sh (nothing is built there). Logs go to $OUT
# (default /tmp/grove-cuda-out); the last lines printed are the summary.
#
#   bash scripts/cuda-check.sh [BUNDLE_DIR] [full|quick|sweep]
#
# quick: 1, 2 and 4 without the 8B and 1B shapes. sweep: 1, then every tiling of the products
# (GROVE_CUDA_MATMUL, same bits) on the 8B BF16 and 1B Q8_0 shapes.
#
# 1. cuda_test: logits against the CPU for every weight type and family, one token's bits alone and
#    in a tree, speculative greedy == plain greedy for chain, Sequoia, OPT-Tree and auto.
# 2. compute-sanitizer (memcheck) over a forward of each kind.
# 3. grove bench --device cuda on random 8B- and 1B-shape models (BF16, Q8_0): t(1) against the
#    weight bytes and the card's copy bandwidth, the verify curve to 256 (profiles kept).
# 4. The base pair on the GPU: plain and speculative tokens/s with the time split (bench --spec),
#    and the whole process (`grove run --compare`) on the GPU and on all CPU cores.
set -uo pipefail
bundle=${1:-.devcarry}
mode=${2:-full}
OUT=${OUT:-/tmp/grove-cuda-out}
out_dir=$OUT
OUT=$out_dir/logs  # packed into $out_dir/logs.tgz at the end (one file to fetch)
mkdir -p "$OUT"
trap 'tar -czf "$out_dir/logs.tgz" -C "$out_dir" logs && rm -rf "$OUT"' EXIT
w=/tmp/grove-gpu
mkdir -p "$w" && tar -xJf "$bundle/bundle.tar.xz" -C "$w"
export LD_LIBRARY_PATH="$w/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
grove="$w/grove"
export GROVE_MODELS="$PWD/models"
say() { echo "== $* ($(date +%T))"; }

say gpu
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv |
  tee "$OUT/gpu.txt"
"$grove" --version | head -3

if [ "$mode" = sweep ]; then
  "$grove" synth --shape llama3.1-8b --type bf16 -o /dev/shm/l8b-bf16.gguf > "$OUT/synth.log" 2>&1 &
  s1=$!
  "$grove" synth --shape llama3.2-1b --type q8_0 -o /dev/shm/l1b-q8_0.gguf >> "$OUT/synth.log" 2>&1 &
  s3=$!
fi
if [ "$mode" = full ]; then
  # The random 8B-shape files are written while the tests run (16 cores, tmpfs).
  "$grove" synth --shape llama3.1-8b --type bf16 -o /dev/shm/l8b-bf16.gguf > "$OUT/synth.log" 2>&1 &
  s1=$!
  "$grove" synth --shape llama3.1-8b --type q8_0 -o /dev/shm/l8b-q8_0.gguf >> "$OUT/synth.log" 2>&1 &
  s2=$!
  "$grove" synth --shape llama3.2-1b --type q8_0 -o /dev/shm/l1b-q8_0.gguf >> "$OUT/synth.log" 2>&1 &
  s3=$!
fi

say cuda_test
timeout 150 "$w/cuda_test" > "$OUT/cuda_test.log" 2>&1
echo "cuda_test exit $?"
grep -E "^\[cuda\]|FAILED|^\[  PASSED|tests ran" "$OUT/cuda_test.log" | head -40

if [ "$mode" = sweep ]; then
  say tilings
  wait $s1 $s3
  for f in l1b-q8_0 l8b-bf16; do
    for v in 0 5 1 4 2; do
      GROVE_CUDA_MATMUL=$v timeout 60 "$grove" bench -m /dev/shm/$f.gguf --device cuda -p 0 -n 0 \
        -r 3 --verify-curve 1,16,32,64,128,256 --curve-prefix 512 --probe-mib 0 \
        > "$OUT/tiling-$f-$v.md" 2>&1
      echo "$f tiling $v:" $(grep -E '^\| [0-9]+ \|' "$OUT/tiling-$f-$v.md" |
        awk -F'|' '{printf "t(%d)=%s ", $2, $3}')
    done
  done
  exit 0
fi
if [ "$mode" = full ]; then
say 8B and 1B shapes
wait $s1 $s2 $s3
cat "$OUT/synth.log"
for f in l8b-bf16 l8b-q8_0 l1b-q8_0; do
  timeout 100 "$grove" bench -m /dev/shm/$f.gguf --device cuda -p 512 -n 32 -r 3 \
    --verify-curve 1,2,4,8,16,32,64,128,256 --curve-prefix 512 \
    --profile-out "$OUT/profile-$f.json" > "$OUT/bench-$f.md" 2> "$OUT/bench-$f.log"
  echo "bench $f: exit $?"
  cat "$OUT/bench-$f.md"
  tail -3 "$OUT/bench-$f.log"
done
# The tilings of the matrix products against each other (same bits; cuda/kernels.cu).
for v in 0 1 2 3 4; do
  GROVE_CUDA_MATMUL=$v timeout 60 "$grove" bench -m /dev/shm/l1b-q8_0.gguf --device cuda -p 0 -n 0 \
    -r 3 --verify-curve 1,16,32,64,128,256 --curve-prefix 512 > "$OUT/tiling-$v.md" 2>&1
  echo "tiling $v (1B q8_0):" $(grep -E '^\| [0-9]+ \|' "$OUT/tiling-$v.md" | awk -F'|' '{printf "t(%d)=%s ", $2, $3}')
done
fi
say base pair
for dev in cuda cpu; do
  timeout 60 "$grove" run --draft-device $dev -p "Once upon a time" -n 128 --temp 0 --compare --device $dev \
    > "$OUT/run-$dev.txt" 2> "$OUT/run-$dev.log"
  echo "run --device $dev: exit $?"
  grep -E "^\[grove\]|speedup|plain|identical" "$OUT/run-$dev.log" | head -8
done
for draft_dev in cuda cpu; do
  timeout 90 "$grove" bench -m models/grove-base-target.gguf --draft models/grove-base-draft.gguf \
    --spec chain:4 --spec sequoia:32 --spec sequoia:64 --spec auto --spec-tokens 128 -r 2 \
    --device cuda --draft-device $draft_dev > "$OUT/spec-draft-$draft_dev.md" \
    2> "$OUT/spec-draft-$draft_dev.log"
  echo "bench --spec, target on the GPU, draft on $draft_dev: exit $?"
  tail -9 "$OUT/spec-draft-$draft_dev.md"
done

say compute-sanitizer
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$w/cuda_test" \
  --gtest_filter='CudaForward.ATokenGets*:*llama_q8_0_head64:*llama_bf16_head64:*head48:Plans/CudaGreedy.*/sequoia_16' \
  > "$OUT/sanitizer.log" 2>&1
echo "compute-sanitizer exit $?"
grep -E "ERROR SUMMARY|Invalid|FAILED" "$OUT/sanitizer.log" | head -8

say done
