#!/usr/bin/env bash
# Median and spread of `grove run` generation speed over repeated runs, until `grove bench` exists.
# usage: scripts/bench-generation.sh MODEL [N_TOKENS=128] [RUNS=5] [THREADS=2]
set -euo pipefail
model=$1; n=${2:-128}; runs=${3:-5}; threads=${4:-2}
grove=${GROVE:-build/release/tools/grove/grove}
speeds=()
for ((i = 0; i < runs; i++)); do
  line=$("$grove" run -m "$model" -p "Once upon a time" -n "$n" --temp 0 --ignore-eos -t "$threads" \
         --no-display-prompt 2>&1 >/dev/null | grep '^\[grove\]')
  speeds+=("$(sed -E 's/.*generation [0-9]+ tokens, ([0-9.]+) t\/s.*/\1/' <<<"$line")")
done
printf '%s\n' "${speeds[@]}" | sort -g | awk -v m="$model" -v n="$n" -v t="$threads" '
  { v[NR] = $1 }
  END {
    med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%s: tg%d, %d threads, %d runs: median %.1f t/s (min %.1f, max %.1f)\n", m, n, t, NR, med, v[1], v[NR]
  }'
