#!/usr/bin/env bash
# The comparisons of issue 10 (ParallelSpec) at one small training budget each, so that they fit
# in about an hour on 2 cores: self-distilled (greedy, as the paper, and sampled) against corpus
# data, the naive-visibility ablation, and the sweep over the number of masks K. Every drafter here trains 200 steps of 4 x 256 tokens, a
# ninth of scripts/train-drafters.sh's budget: the figures compare drafters with each other, not
# with the fully trained ones.
#
#   bash scripts/drafter-sweep.sh [WORK_DIR]     (default build/sweep; about 65 min on 2 cores)
#
# Resumable: a finished drafter is skipped, an interrupted one resumes from its checkpoint.
set -euo pipefail
G=${GROVE:-build/release/tools/grove/grove}
W=${1:-build/sweep}
T=${THREADS:-2}
TARGET=${TARGET:-models/grove-base-target.gguf}
CORPUS=${CORPUS:-build/train/corpus}
[ -f "$CORPUS/valid.txt" ] || $G corpus --out "$CORPUS" --seed 1 --tokens 6000000

# The target's own greedy continuations of the corpus's document openings (the paper's data).
[ -f "$W/self/valid.txt" ] || $G self-distill --target "$TARGET" --corpus "$CORPUS" -o "$W/self" \
  --tokens 220000 --valid-tokens 20000 -t "$T"

# The same prompts continued at temperature 1: the target's own distribution (no top-k, top-p or
# min-p filter), without greedy decoding's collapse onto a few templates.
[ -f "$W/self-t1/valid.txt" ] || $G self-distill --target "$TARGET" --corpus "$CORPUS" \
  -o "$W/self-t1" --tokens 220000 --valid-tokens 20000 --temp 1 --top-k 0 --top-p 1 --min-p 0 \
  -t "$T"

budget=(--target "$TARGET" --steps 200 --batch 4 --seq-len 256 --warmup 20 --lr 2e-3
        --logit-weight 1 --eval-every 100 --eval-batches 4 --log-every 50 -t "$T")
train() {  # NAME CORPUS ARGS...
  local name=$1 corpus=$2; shift 2
  [ -f "$W/$name.gguf" ] && return
  $G train-drafter "${budget[@]}" --corpus "$corpus" -o "$W/$name.run" --name "sweep-$name" \
    --export "$W/$name.gguf" "$@"
}
train parallel4 "$CORPUS" --drafter parallel --masks 4
train parallel4-self "$W/self" --drafter parallel --masks 4
train feature "$CORPUS" --drafter feature
train feature-self "$W/self" --drafter feature
train feature-self-t1 "$W/self-t1" --drafter feature
train parallel4-self-t1 "$W/self-t1" --drafter parallel --masks 4
train parallel4-across "$CORPUS" --drafter parallel --masks 4 --mask-visibility across-groups
for k in 1 2 3 6 8; do train "parallel$k" "$CORPUS" --drafter parallel --masks "$k"; done
echo "drafters in $W; measure them with scripts/drafter-sweep-bench.sh"
