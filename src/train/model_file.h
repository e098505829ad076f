// Trained models as GGUF files: export in the llama layout that grove and other GGUF engines load,
// and load back into the trainer's flat parameter buffer (a teacher for distillation, or a model to
// continue from). A checkpoint is such a file too (f32, plus the optimizer's state), so
// `grove run -m RUN/checkpoint.gguf` works on a run in progress.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "model/config.h"
#include "train/train_model.h"

namespace grove {

using GgufKeyValues = std::vector<std::pair<std::string, GgufValue>>;

// The tokenizer.* keys of a file (a vocab-only tokenizer GGUF or a model). Throws grove::Error
// naming the file when it has no tokenizer.ggml.tokens.
GgufKeyValues TokenizerKeys(const GgufFile& file);

// Number of tokens in tokenizer.ggml.tokens of these keys.
int32_t TokenizerVocabSize(const GgufKeyValues& keys);

// The weight types the trainer exports: f32, f16, bf16, q8_0.
bool IsTrainerExportType(GgmlType type);

// A writer holding the llama metadata, the tokenizer keys and every tensor of `params`: matrices in
// `type` (f32, f16, bf16 or q8_0; rows must be whole blocks), norm gains always f32. The caller may
// add keys and tensors before writing. params must outlive the writer.
GgufWriter TrainedModelWriter(const ParamLayout& layout, const float* params,
                              const GgufKeyValues& tokenizer, GgmlType type,
                              const std::string& name);

struct LoadedTrainModel {
  TrainShape shape;
  std::vector<float> params;
  GgufKeyValues tokenizer;
};

// The trainer's view of a model's shape (what LoadTrainModel checks aside).
TrainShape TrainShapeOf(const ModelConfig& config);

// Reads a llama GGUF of the shape the trainer supports (as many key/value heads as heads, RoPE over
// the whole head, no rope scaling) and dequantizes every tensor to f32. Throws grove::Error naming
// what does not fit.
LoadedTrainModel LoadTrainModel(const GgufFile& file);

// Every tensor of `layout`, by name, dequantized to f32. Throws grove::Error naming a tensor that
// is missing or of another shape.
std::vector<float> ReadLayoutParams(const GgufFile& file, const ParamLayout& layout);

}  // namespace grove
