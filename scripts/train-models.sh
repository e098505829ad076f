#!/usr/bin/env bash
# Reproduces the bundled pairs in models/ from nothing: corpus -> tokenizer -> the small pair's
# target and drafts (one trained plainly, one distilled from the target) -> the base pair's target and
# its distilled draft -> Q8_0 exports -> the figures of models/README.md.
#
#   bash scripts/train-models.sh [WORK_DIR]      (default build/train; about 2 h 15 min on 2 cores)
#   PAIRS=base bash scripts/train-models.sh      (only the base pair; PAIRS=small only the small one)
#
# Every step is resumable: run the script again after an interruption (Ctrl-C included) and each
# training run continues from its last checkpoint; finished steps are skipped.
set -euo pipefail
G=${GROVE:-build/release/tools/grove/grove}
W=${1:-build/train}
T=${THREADS:-2}
PAIRS=${PAIRS:-"small base"}
mkdir -p "$W"

[ -f "$W/corpus/valid.txt" ] || $G corpus --out "$W/corpus" --seed 1 --tokens 6000000
[ -f "$W/corpus/tok.gguf" ] || $G tokenizer-train --corpus "$W/corpus" --vocab 3072 -o "$W/corpus/tok.gguf"
common=(--corpus "$W/corpus" --tokenizer "$W/corpus/tok.gguf" --ctx 512 --seq-len 512 --batch 8
        --eval-every 100 --eval-batches 8 --checkpoint-every 100 -t "$T")

if [[ " $PAIRS " == *" small "* ]]; then
  # Target: 11.8 M parameters.
  $G train "${common[@]}" -o "$W/target" --name grove-target-12m --dim 384 --layers 6 --heads 6 --ffn 1024 \
    --steps 1200 --warmup 80 --lr 2e-3 --export "$W/grove-target.gguf" --export-type q8_0

  # Drafts: 1.03 M parameters (11x smaller), the same recipe with and without distillation.
  draft=(--dim 128 --layers 3 --heads 4 --ffn 384 --steps 600 --warmup 40 --lr 3e-3)
  $G train "${common[@]}" -o "$W/draft-plain" --name grove-draft-1m-plain "${draft[@]}" \
    --export "$W/draft-plain.gguf" --export-type q8_0
  $G train "${common[@]}" -o "$W/draft" --name grove-draft-1m "${draft[@]}" \
    --teacher "$W/grove-target.gguf" --export "$W/grove-draft.gguf" --export-type q8_0

  # Figures: validation loss of each model and each draft's greedy agreement with the target.
  for d in draft-plain grove-draft; do
    $G eval -m "$W/grove-target.gguf" --draft "$W/$d.gguf" --corpus "$W/corpus" --windows 64 --seq-len 512
  done
fi

if [[ " $PAIRS " == *" base "* ]]; then
  # Base target: 42.6 M parameters, 45 MB in Q8_0, more than this CPU's last-level cache.
  $G train "${common[@]}" -o "$W/base-target" --name grove-target-43m --dim 640 --layers 8 \
    --heads 10 --ffn 1792 --steps 900 --warmup 60 --lr 1.5e-3 \
    --export "$W/grove-base-target.gguf" --export-type q8_0
  # Its draft: 2.4 M parameters (18x smaller), distilled from it.
  $G train "${common[@]}" -o "$W/base-draft" --name grove-draft-2m --dim 192 --layers 4 \
    --heads 4 --ffn 512 --steps 500 --warmup 40 --lr 3e-3 --teacher "$W/grove-base-target.gguf" \
    --export "$W/grove-base-draft.gguf" --export-type q8_0
  $G eval -m "$W/grove-base-target.gguf" --draft "$W/grove-base-draft.gguf" --corpus "$W/corpus" \
    --windows 64 --seq-len 512
  # The pair's acceptance vectors, auto's starting estimate: greedy, and sampling at temperature 1.
  pair=(-m "$W/grove-base-target.gguf" --draft "$W/grove-base-draft.gguf"
        --prompts bench/prompts/calibration.txt --width 8 -n 128 -t "$T")
  $G calibrate "${pair[@]}" --temp 0 -o "$W/grove-base.greedy.accept.json"
  $G calibrate "${pair[@]}" --temp 1 --top-k 0 --top-p 1 --min-p 0 -o "$W/grove-base.sampled.accept.json"
fi
echo "copy $W/grove-{target,draft,base-target,base-draft}.gguf and $W/grove-base.*.accept.json to"
echo "models/ to ship them"
