#!/usr/bin/env bash
# Measures the drafters of scripts/drafter-sweep.sh in one run per temperature, against one plain
# baseline, with the bundled standalone draft beside them. Writes JSON (τ, tokens/s with spread,
# acceptance by depth, the step's time split) to WORK_DIR/bench-t0.json and bench-t1.json;
# summarize them with scripts/drafter-sweep-table.py.
#
#   bash scripts/drafter-sweep-bench.sh [WORK_DIR]     (default build/sweep; about 8 min)
set -euo pipefail
G=${GROVE:-build/release/tools/grove/grove}
W=${1:-build/sweep}
TARGET=${TARGET:-models/grove-base-target.gguf}
drafts=(--draft models/grove-base-draft.gguf)
for name in feature feature-self parallel4 parallel4-self parallel4-across parallel1 parallel2 \
            parallel3 parallel6 parallel8; do
  [ -f "$W/$name.gguf" ] && drafts+=(--draft "$W/$name.gguf")
done
# Temperature 0: every chain depth a K of the sweep fills (K + 1 levels from one forward).
$G bench -m "$TARGET" "${drafts[@]}" --prompts bench/prompts/stories.txt --spec chain:2 \
  --spec chain:3 --spec chain:4 --spec chain:5 --spec chain:7 --spec chain:9 --temp 0 -r 3 -t 1 \
  -o json > "$W/bench-t0.json"
# Temperature 1 (Sequoia's rule): the data comparison and the drafters at the paper's K.
$G bench -m "$TARGET" --draft models/grove-base-draft.gguf --draft "$W/feature.gguf" \
  --draft "$W/feature-self.gguf" --draft "$W/parallel4.gguf" --draft "$W/parallel4-self.gguf" \
  --prompts bench/prompts/stories.txt --spec chain:3 --spec chain:5 --temp 1 -r 3 -t 1 \
  -o json > "$W/bench-t1.json"
