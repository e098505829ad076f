#!/usr/bin/env bash
# Reproduces the bundled pair in models/ from nothing: corpus -> tokenizer -> target -> drafts (one
# trained plainly, one distilled from the target) -> Q8_0 exports -> the figures of models/README.md.
#
#   bash scripts/train-models.sh [WORK_DIR]      (default build/train; about 1 h on 2 cores)
#
# Every step is resumable: run the script again after an interruption (Ctrl-C included) and each
# training run continues from its last checkpoint; finished steps are skipped.
set -euo pipefail
G=${GROVE:-build/release/tools/grove/grove}
W=${1:-build/train}
T=${THREADS:-2}
mkdir -p "$W"

[ -f "$W/corpus/valid.txt" ] || $G corpus --out "$W/corpus" --seed 1 --tokens 6000000
[ -f "$W/corpus/tok.gguf" ] || $G tokenizer-train --corpus "$W/corpus" --vocab 3072 -o "$W/corpus/tok.gguf"
common=(--corpus "$W/corpus" --tokenizer "$W/corpus/tok.gguf" --ctx 512 --seq-len 512 --batch 8
        --eval-every 100 --eval-batches 8 --checkpoint-every 100 -t "$T")

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
echo "copy $W/grove-target.gguf and $W/grove-draft.gguf to models/ to ship them"
