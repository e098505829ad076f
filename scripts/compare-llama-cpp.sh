#!/usr/bin/env bash
# Speculative decoding with a bundled pair (the base one unless TARGET and DRAFT name others), grove
# beside llama.cpp, in one run: for each thread count and repetition, every prompt of a prompt file is decoded by grove (chain:4, the tree
# llama.cpp's draft-simple builds with --spec-draft-n-max 4, and grove's default auto) and by
# llama.cpp's llama-speculative-simple, alternately, so machine drift moves both alike. Prints the
# median generation tokens/s of each (prefill excluded by both) with min-max, and the ratios.
#
# llama.cpp is built outside this project (../shared/tools/build-llama-cpp.sh); pass its bin/.
# Usage: scripts/compare-llama-cpp.sh LLAMA_BIN_DIR [THREADS="1 2"] [REPS=3] [PROMPTS=bench/prompts/stories.txt]
set -euo pipefail
cd "$(dirname "$0")/.."
llama=${1:?usage: $0 LLAMA_BIN_DIR [THREADS] [REPS] [PROMPTS]}
threads=${2:-"1 2"}
reps=${3:-3}
prompts=${4:-bench/prompts/stories.txt}
grove=build/release/tools/grove/grove
target=${TARGET:-models/grove-base-target.gguf}  # TARGET/DRAFT choose another pair, e.g. the small one
draft=${DRAFT:-models/grove-base-draft.gguf}
n=128
[ -x "$grove" ] || { echo "build grove first: cmake --preset release && cmake --build --preset release" >&2; exit 1; }
[ -x "$llama/llama-speculative-simple" ] || { echo "no llama-speculative-simple in $llama" >&2; exit 1; }

# Prompts are separated by blank lines, as for grove bench --spec.
mapfile -t list < <(awk 'BEGIN{RS=""} {gsub(/\n/, " "); print}' "$prompts")

# Median (min-max) of the runs that reported a speed; a run that printed none is counted apart.
median() {
  grep -E '^[0-9.]+$' | sort -g |
    awk -v all="$1" '{a[NR]=$1} END{if (NR==0) {print "nan"; exit} m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2;
      printf "%.1f (%.1f-%.1f%s)", m, a[1], a[NR], NR < all ? ", " all - NR " runs without a speed" : ""}'
}
grove_tps() {  # prints generation t/s of one grove run
  "$grove" run -m "$target" --draft "$draft" --spec "$1" -p "$2" -n $n --temp 0 -t "$3" --no-display-prompt 2>&1 >/dev/null |
    sed -n 's/.*tokens\/step | \([0-9.]*\) t\/s.*/\1/p'
}
llama_tps() {
  "$llama/llama-speculative-simple" -m "$target" -md "$draft" -p "$1" -n $n --spec-type draft-simple \
    --spec-draft-n-max 4 --temp 0 -t "$2" -td "$2" 2>&1 | sed -n 's/.*decoded .* speed: *\([0-9.]*\) t\/s.*/\1/p'
}

echo "| threads | grove chain:4 t/s | grove auto t/s | llama.cpp draft-simple n-max 4 t/s | chain:4 / llama.cpp | auto / llama.cpp |"
echo "|---:|---:|---:|---:|---:|---:|"
for t in $threads; do
  g4=(); ga=(); lc=()
  for ((r = 0; r < reps; ++r)); do
    for p in "${list[@]}"; do
      g4+=("$(grove_tps chain:4 "$p" "$t")")
      ga+=("$(grove_tps auto "$p" "$t")")
      lc+=("$(llama_tps "$p" "$t")")
    done
  done
  runs=${#lc[@]}
  m4=$(printf '%s\n' "${g4[@]}" | median "$runs"); ma=$(printf '%s\n' "${ga[@]}" | median "$runs")
  ml=$(printf '%s\n' "${lc[@]}" | median "$runs")
  r4=$(awk -v a="${m4%% *}" -v b="${ml%% *}" 'BEGIN{printf "%.2f", a/b}')
  ra=$(awk -v a="${ma%% *}" -v b="${ml%% *}" 'BEGIN{printf "%.2f", a/b}')
  echo "| $t | $m4 | $ma | $ml | $r4 | $ra |"
done
