// Trains a feature drafter (speculate/feature_drafter.h) for a target: `grove train-drafter
// --drafter feature|parallel --target T.gguf` (parallel: --masks K, ParallelSpec's group-wise
// training). Each step draws windows of text, runs the target over them
// with grove's inference forward (the features and distributions the drafter will read when it
// drafts are exactly these), and trains the drafter's layer and fusion matrix on the two losses of
// train/drafter_graph.h. The target's embedding, final norm and head are copied into the
// drafter and stay frozen.
//
// A run is a directory as for `grove train` (train/checkpoint.h): the checkpoint is itself a
// feature drafter file (f32), resumable bit for bit, refusing another target or setting by name.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "io/ggml_type.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "train/drafter_graph.h"
#include "train/model_file.h"
#include "train/trainer.h"

namespace grove {

struct FeatureTrainOptions {
  std::string target_path;  // the target GGUF (its tokenizer tokenizes the corpus)
  std::string corpus_dir;   // train.txt and valid.txt (`grove corpus`, or self-distilled text)
  std::string out_dir;
  std::string name = "grove-feature-drafter";
  OptimizerConfig optimizer;
  int32_t batch = 8;
  int32_t seq_len = 256;  // tokens per window: the target's rows and the drafter's
  uint64_t seed = 1;
  float logit_weight = 0.1f;  // EAGLE's weights: 0.1 on the distribution, 1 on the feature
  float feature_weight = 1.0f;
  int32_t masks = 0;        // K: 0 trains the autoregressive drafter, K > 0 the parallel one
  float mask_decay = 0.8f;  // mask j's losses weigh mask_decay^j
  MaskVisibility visibility = MaskVisibility::kGroupWise;  // kAcrossGroups: the paper's ablation
  int64_t eval_every = 100;
  int32_t eval_batches = 2;
  int64_t checkpoint_every = 100;
  int32_t threads = 2;
};

void ValidateFeatureTrainOptions(const FeatureTrainOptions& o);

// Trains until optimizer.steps or *stop. Progress as TrainProgress: loss is the total loss,
// valid_loss the total loss on the validation windows, valid_agreement the share of their rows
// where the drafter's argmax is the target's (a one-token greedy speculation's acceptance).
TrainResult TrainFeatureDrafter(const FeatureTrainOptions& options,
                                const std::function<void(const TrainProgress&)>& progress,
                                const std::atomic<bool>* stop = nullptr);

// The target a feature drafter belongs to, as its file names it (model/drafter_file.h).
struct DrafterTarget {
  std::string name;
  std::string fingerprint;
};
DrafterTarget DrafterTargetOf(const GgufFile& target);

// A feature drafter file of the parameters (DrafterLayout: parallel when it has masks), matrices in
// `type`, saying which target it belongs to.
GgufWriter FeatureDrafterWriter(const ParamLayout& layout, const float* params,
                                const GgufKeyValues& tokenizer, GgmlType type,
                                const std::string& name, const DrafterTarget& target);

// A new drafter's parameters: InitParams(layout, seed), the frozen tensors copied from the
// target's (f32 parameters of target_layout).
std::vector<float> InitFeatureDrafter(const ParamLayout& layout, const ParamLayout& target_layout,
                                      const float* target_params, uint64_t seed);

// Writes a checkpoint of TrainFeatureDrafter as a feature drafter of weight type `type`
// (f32, f16, bf16, q8_0); the frozen tensors the target quantized come back to the same values.
// general.name is `name`, or the checkpoint's when empty.
void ExportFeatureDrafter(const std::string& checkpoint, const std::string& out, GgmlType type,
                          const std::string& name = "");

}  // namespace grove
