#!/usr/bin/env bash
# Trains the drafters that read the base target's hidden states (issue 10, ParallelSpec): the
# autoregressive feature drafter and the parallel drafter with K = 4 masks, on the corpus of
# scripts/train-models.sh, then measures them beside the bundled standalone draft in one run.
#
#   bash scripts/train-drafters.sh [WORK_DIR]     (default build/train; about 15 + 55 min on 2 cores)
#
# Resumable like train-models.sh: run it again after an interruption.
set -euo pipefail
G=${GROVE:-build/release/tools/grove/grove}
W=${1:-build/train}
T=${THREADS:-2}
TARGET=${TARGET:-models/grove-base-target.gguf}
[ -f "$W/corpus/valid.txt" ] || $G corpus --out "$W/corpus" --seed 1 --tokens 6000000

common=(--target "$TARGET" --corpus "$W/corpus" --steps 900 --batch 8 --seq-len 256 --warmup 50
        --lr 1.5e-3 --eval-every 100 --log-every 50 -t "$T")
$G train-drafter --drafter feature "${common[@]}" -o "$W/feature" --name grove-base-feature \
  --export "$W/grove-base-feature.gguf"
$G train-drafter --drafter parallel --masks 4 "${common[@]}" -o "$W/parallel4" \
  --name grove-base-parallel4 --export "$W/grove-base-parallel4.gguf"

# The three drafters, every plan, against plain decoding, in one run per temperature.
for temp in 0 1; do
  $G bench -m "$TARGET" --draft models/grove-base-draft.gguf --draft "$W/grove-base-feature.gguf" \
    --draft "$W/grove-base-parallel4.gguf" --prompts bench/prompts/stories.txt --spec chain:3 \
    --spec chain:4 --spec chain:5 --spec file:bench/trees/eagle-25.json --temp "$temp" -r 3 -t 1
done
