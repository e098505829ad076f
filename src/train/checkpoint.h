// A training run's checkpoint: an f32 llama GGUF of the parameters (so `grove run` samples from a
// run in progress), AdamW's two moments, the step, the elapsed time and every setting that shapes
// the result. Loading it back refuses another model shape, tokenizer or setting by name, so a
// resumed run is the run that stopped. Shared by `grove train` (train/trainer.h) and the feature
// drafter's trainer (train/feature_trainer.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "train/model_file.h"
#include "train/optimizer.h"
#include "train/train_model.h"

namespace grove {

// (name, value) of each setting that shapes the result, stored as grove.train.setting.NAME.
using CheckpointSettings = std::vector<std::pair<std::string, std::string>>;

// The optimizer's settings (steps, warm-up, learning rates, betas, epsilon, decay, clipping).
CheckpointSettings OptimizerSettings(const OptimizerConfig& c);

// %.17g: a double that reads back exactly.
std::string FormatDouble(double v);

// The texts of tokenizer.ggml.tokens among these keys. Throws grove::Error when there are none.
const std::vector<std::string>& TokenTexts(const GgufKeyValues& keys);

// What a checkpoint holds besides the optimizer's moments (which AdamW keeps).
struct RunState {
  std::vector<float> params;
  int64_t step = 0;
  double elapsed_s = 0;
  double last_valid_loss = NAN;
};

// Writes the checkpoint (through a temporary file, renamed); `extra` keys are added as they are.
void SaveCheckpoint(const std::string& path, const ParamLayout& layout, const RunState& state,
                    const AdamW& adam, const GgufKeyValues& tokenizer, const std::string& name,
                    const CheckpointSettings& settings, const GgufKeyValues& extra = {});

// Reads the run state and loads the optimizer's moments into `adam`. Throws grove::Error naming
// the shape, tokenizer or setting that differs from this run's.
RunState LoadCheckpoint(const std::string& path, const ParamLayout& layout,
                        const GgufKeyValues& tokenizer, const std::string& tokenizer_path,
                        const CheckpointSettings& settings, AdamW& adam);

}  // namespace grove
