#!/usr/bin/env bash
# Measures the drafters of scripts/drafter-sweep.sh in one run per temperature, against one plain
# baseline, with the bundled standalone draft beside them. Writes JSON (τ, tokens/s with spread,
# acceptance by depth, the step's time split) to WORK_DIR/bench-t0.json (every drafter, chains of
# every depth a K fills) and bench-data-t0.json, bench-data-t1.json (the data comparison);
# summarize them with scripts/drafter-sweep-table.py.
#
#   bash scripts/drafter-sweep-bench.sh [WORK_DIR]     (default build/sweep; about 10 min)
set -euo pipefail
G=${GROVE:-build/release/tools/grove/grove}
W=${1:-build/sweep}
TARGET=${TARGET:-models/grove-base-target.gguf}
drafts=(--draft models/grove-base-draft.gguf)
for name in feature feature-self feature-self-t1 parallel4 parallel4-self parallel4-self-t1 \
            parallel4-across parallel1 parallel2 parallel3 parallel6 parallel8; do
  [ -f "$W/$name.gguf" ] && drafts+=(--draft "$W/$name.gguf")
done
# Temperature 0: every chain depth a K of the sweep fills (K + 1 levels from one forward).
$G bench -m "$TARGET" "${drafts[@]}" --prompts bench/prompts/stories.txt --spec chain:2 \
  --spec chain:3 --spec chain:4 --spec chain:5 --spec chain:7 --spec chain:9 --temp 0 -r 3 -t 1 \
  -o json > "$W/bench-t0.json"
# The data comparison at both temperatures (Sequoia's rule at 1): corpus text, greedy and sampled
# self-distilled text, for the AR and K = 4 drafters.
for temp in 0 1; do
  $G bench -m "$TARGET" --draft models/grove-base-draft.gguf --draft "$W/feature.gguf" \
    --draft "$W/feature-self.gguf" --draft "$W/feature-self-t1.gguf" --draft "$W/parallel4.gguf" \
    --draft "$W/parallel4-self.gguf" --draft "$W/parallel4-self-t1.gguf" \
    --prompts bench/prompts/stories.txt --spec chain:3 --spec chain:5 --temp "$temp" --top-k 0 --top-p 1 --min-p 0 -r 3 -t 1 \
    -o json > "$W/bench-data-t$temp.json"
done
