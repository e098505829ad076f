#!/usr/bin/env bash
# Real models' shapes, grove beside llama.cpp in one run: for each named shape (grove synth: random
# weights, the real model's widths, heads, vocabulary and family) and weight type, both engines
# time pp512 and tg64 on the same file, alternately (one repetition each, REPS times), so machine
# drift moves both alike. Prints medians with min-max and the ratio grove / llama.cpp.
#
# Files: the types in LLAMA_TYPES (default: the presets q4_k_m q5_k_m q3_k_m q3_k_s q2_k iq4_xs
# iq4_nl) are made by llama.cpp's llama-quantize from an f16 synth, so both engines run llama.cpp's
# own file; the other single types (q8_0, q5_0, ...) are written by
# grove synth. If grove cannot read a llama.cpp file, grove's own quantize writes the file both run.
#
# With VERIFY=1 it also prints grove's verify curve t(n)/t(1) of each shape (1..64 tokens) and,
# for each real pair among the shapes (PAIRS), the speedup speculative decoding is predicted to give
# (grove tree: the best Sequoia tree of at most 32 tokens for the target's verify curve, the
# draft's measured cost per level (1 / its tg64) and the bundled pair's greedy acceptance vector,
# since random weights accept nothing).
#
# llama.cpp is built outside this project (../shared/tools/build-llama-cpp.sh); pass its bin/.
# THREADS is a list ("2 8 16"): the table has a row per shape, type and thread count, and for each
# thread count the cores' arithmetic peak (build/release/bench/peak_ops: fp32 FMA for F16 and f32
# files, int8 dot products for the quantized ones, which compute with int8 activations) and the
# share of it grove's pp512 reaches, counting 2 x parameters operations per token (the embedding's
# parameters, counted but only looked up, weigh about what attention's products at 256 tokens do,
# uncounted).
#
# Usage: scripts/compare-shapes.sh LLAMA_BIN_DIR [SHAPES] [TYPES="q8_0 q4_k_m"] [THREADS="2"] [REPS=3]
#        (DIR=/tmp/grove-shapes holds the files; KEEP=1 keeps them; files over 3 GB get REPS_BIG=2
#        repetitions: a pp512 of an 8B shape takes minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
llama=${1:?usage: $0 LLAMA_BIN_DIR [SHAPES] [TYPES] [THREADS] [REPS]}
shapes=${2:-"qwen2.5-0.5b qwen3-0.6b gemma3-1b llama3.2-1b phi4-mini gemma3-4b qwen2.5-7b qwen3-8b llama3.1-8b"}
types=${3:-"q8_0 q4_k_m"}
thread_counts=${4:-2}
thread_counts=${thread_counts//,/ }
threads=${thread_counts##* }  # llama-quantize's, and VERIFY's pairs: the largest count
reps=${5:-3}
dir=${DIR:-/tmp/grove-shapes}
grove=build/release/tools/grove/grove
[ -x "$grove" ] || { echo "build grove first: cmake --preset release && cmake --build --preset release" >&2; exit 1; }
[ -x "$llama/llama-bench" ] || { echo "no llama-bench in $llama" >&2; exit 1; }
# llama.cpp's libraries from LLAMA_BIN_DIR itself: its binaries' RUNPATH names the directory they
# were built in, so a copy beside another libggml-cpu (an AVX2-only build) would load the native one.
export LD_LIBRARY_PATH="$llama${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$dir"
pairs=${PAIRS:-"qwen2.5-0.5b:qwen2.5-7b qwen3-0.6b:qwen3-8b gemma3-1b:gemma3-4b llama3.2-1b:llama3.1-8b"}
accept=${ACCEPT:-models/grove-base.greedy.accept.json}
declare -A tg_of  # "shape type" -> grove's median tg64

# The file of a shape and type, made once.
model_file() {
  local shape=$1 type=$2 out="$dir/$1-$2.gguf"
  if [ ! -f "$out" ]; then
    if [[ " ${LLAMA_TYPES:-q4_k_m q5_k_m q3_k_m q3_k_s q2_k iq4_xs iq4_nl} " == *" $type "* ]]; then
      local f16="$dir/$shape-f16.gguf"
      "$grove" synth --shape "$shape" --type f16 -o "$f16" --force >&2
      "$llama/llama-quantize" "$f16" "$out.llama" "${type^^}" "$threads" > "$dir/$shape-quantize.log" 2>&1
      if ! "$grove" bench -m "$out.llama" -p 1 -n 0 -r 1 --probe-mib 0 > /dev/null 2>&1; then
        echo "$shape: llama.cpp's $type holds types grove does not read; using grove's quantize" >&2
        "$grove" quantize "$f16" "$out" "$type" --force >&2
        rm -f "$out.llama"
      else
        mv "$out.llama" "$out"
      fi
      rm -f "$f16"
    else
      "$grove" synth --shape "$shape" --type "$type" -o "$out" --force >&2
    fi
  fi
  echo "$out"
}

# t/s of one repetition at $2 threads: "pp tg" (grove's: "pp tg parameters").
grove_rep() {
  "$grove" bench -m "$1" -p 512 -n 64 -r 1 -t "$2" --probe-mib 0 -o json 2>/dev/null |
    jq -r '[(.runs[0].tests[] | .median_ts), .runs[0].model_params] | map(tostring) | join(" ")'
}
llama_rep() {
  "$llama/llama-bench" -m "$1" -p 512 -n 64 -r 1 -t "$2" -o json 2>/dev/null |
    jq -r '[.[] | .avg_ts] | map(tostring) | join(" ")'
}

# The cores' peak at each thread count: "fp32_gflops int8_gops".
peak_ops=build/release/bench/peak_ops
declare -A peak_of
for t in $thread_counts; do
  if [ -x "$peak_ops" ]; then
    peak_of[$t]=$("$peak_ops" "$t" | sed -E 's/.*fp32 ([0-9.]+) GFLOP.*int8 ([0-9.]+) GOP.*/\1 \2/')
  fi
done
# grove's pp512 as a share of the peak its type computes at: share PP PARAMS TYPE THREADS.
share() {
  local peak=${peak_of[$4]:-}
  [ -n "$peak" ] || { echo "-"; return; }
  local fp32=${peak%% *} int8=${peak##* }
  local p=$int8
  [[ $3 == f16 || $3 == f32 || $3 == bf16 ]] && p=$fp32
  awk -v pp="$1" -v n="$2" -v peak="$p" 'BEGIN{printf "%.0f%%", 100 * pp * 2 * n / (peak * 1e9)}'
}

# Median (min-max) of numbers on stdin.
median() {
  sort -g | awk '{a[NR]=$1} END{m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f (%.2f-%.2f)", m, a[1], a[NR]}'
}
ratio() { awk -v a="${1%% *}" -v b="${2%% *}" 'BEGIN{printf "%.2f", a/b}'; }

echo "machine: $(nproc) cores, grove kernels: $("$grove" --version | sed -n 's/^kernels: //p'), threads $thread_counts, $reps repetitions alternating"
for t in $thread_counts; do
  [ -n "${peak_of[$t]:-}" ] && echo "peak at $t threads: fp32 ${peak_of[$t]%% *} GFLOP/s, int8 ${peak_of[$t]##* } GOP/s ($peak_ops)"
done
echo
echo "| shape | type | file | threads | grove pp512 | llama.cpp pp512 | pp ratio | grove pp512 of peak | grove tg64 | llama.cpp tg64 | tg ratio |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for shape in $shapes; do
  for type in $types; do
    file=$(model_file "$shape" "$type")
    size=$(du -h "$file" | cut -f1)
    n_reps=$reps
    [ "$(stat -c %s "$file")" -gt 3000000000 ] && n_reps=${REPS_BIG:-2}
    for t in $thread_counts; do
      gp=(); gt=(); lp=(); lt=(); params=0
      for ((r = 0; r < n_reps; ++r)); do
        read -r a b params <<<"$(grove_rep "$file" "$t")"; gp+=("$a"); gt+=("$b")
        read -r a b <<<"$(llama_rep "$file" "$t")"; lp+=("$a"); lt+=("$b")
      done
      mgp=$(printf '%s\n' "${gp[@]}" | median); mlp=$(printf '%s\n' "${lp[@]}" | median)
      mgt=$(printf '%s\n' "${gt[@]}" | median); mlt=$(printf '%s\n' "${lt[@]}" | median)
      echo "| $shape | $type | $size | $t | $mgp | $mlp | $(ratio "$mgp" "$mlp") | $(share "${mgp%% *}" "$params" "$type" "$t") | $mgt | $mlt | $(ratio "$mgt" "$mlt") |"
      tg_of["$shape $type"]=${mgt%% *}  # the largest thread count's, for the pairs below
      if [ "${VERIFY:-0}" = 1 ]; then
        "$grove" bench -m "$file" -p 0 -n 0 -r "$n_reps" -t "$t" --probe-mib 0 \
          --verify-curve 1,2,4,8,16,32,64 --profile-out "$dir/$shape-$type.profile.json" 2>/dev/null |
          awk -v s="$shape $type, $t threads" '/^\| [0-9]+ \|/ {r = r " t(" $2 ")/t(1) " $8} END {print "verify curve " s ":" r}'
      fi
    done
    [ "${KEEP:-0}" = 1 ] || rm -f "$file"
  done
done

if [ "${VERIFY:-0}" = 1 ]; then
  echo
  echo "| target | draft | target type | draft type | draft s/level | predicted tree | predicted speedup |"
  echo "|---|---|---|---|---:|---|---:|"
  for pair in $pairs; do
    draft=${pair%%:*}; target=${pair##*:}
    for ttype in $types; do
      for dtype in q8_0; do
        profile="$dir/$target-$ttype.profile.json"
        dtg=${tg_of["$draft $dtype"]:-}
        [ -f "$profile" ] && [ -n "$dtg" ] || continue
        cost=$(awk -v t="$dtg" 'BEGIN{printf "%.6f", 1 / t}')
        line=$("$grove" tree --accept "$accept" --profile "$profile" --budget 32 --draft-cost "$cost" 2>&1 |
               grep 'hardware-aware choice')
        tree=$(sed -E 's/.*choice: (n = [0-9]+ tokens, depth [0-9]+).*/\1/' <<<"$line")
        speedup=$(sed -E 's/.*speedup ([0-9.]+x).*/\1/' <<<"$line")
        echo "| $target | $draft | $ttype | $dtype | $cost | $tree | $speedup |"
      done
    done
  done
fi
