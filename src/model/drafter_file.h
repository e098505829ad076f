// What a drafter file says about itself. A feature drafter (speculate/feature_drafter.h) is a
// one-layer llama GGUF that reads one particular target's hidden states, so its file names its kind
// and that target: the target's name, and a fingerprint of the tensors the drafter shares with it
// (embedding, final norm, head) and of the target's last layer, whose output is the feature.
// Pairing it with any other target is refused with both names.
#pragma once

#include <cstdint>
#include <string>

#include "model/weights.h"

namespace grove {

class GgufFile;

inline constexpr const char* kDrafterKindKey = "grove.drafter.kind";
inline constexpr const char* kDrafterTargetNameKey = "grove.drafter.target.name";
inline constexpr const char* kDrafterTargetFingerprintKey = "grove.drafter.target.fingerprint";
// The fusion matrix: (n_embd rows of 2 n_embd), [token embedding; feature] to the layer's input.
inline constexpr const char* kDrafterFusionTensor = "fc.weight";
// A parallel drafter's K mask-token embeddings (K rows of n_embd, f32), and K.
inline constexpr const char* kDrafterMaskTensor = "mask_embd.weight";
inline constexpr const char* kDrafterMasksKey = "grove.drafter.masks";

// kFeature: autoregressive (one forward per tree level); kParallel: ParallelSpec's, K mask tokens
// giving K + 1 levels in one forward; kModel: any other model (a standalone draft).
enum class DrafterKind { kModel, kFeature, kParallel };

// The kind kDrafterKindKey names ("feature", "parallel"), kModel without it. Throws grove::Error on
// an unknown kind.
DrafterKind ReadDrafterKind(const GgufFile& file);
// K of a parallel drafter (0 for any other file). Throws grove::Error when out of range.
int32_t ReadDrafterMasks(const GgufFile& file);

// 16 hex digits: FNV-1a over the target's token_embd, output_norm, output (when untied) and last
// layer's ffn_down bytes, with its width and depth. Throws grove::Error naming a missing tensor.
std::string TargetFingerprint(const GgufFile& target);

// Throws grove::Error unless `drafter` was trained for `target` (same fingerprint), naming both.
void CheckDrafterTarget(const GgufFile& drafter, const GgufFile& target);

// A feature or parallel drafter's own tensors, checked against the target it reads (kind, target
// fingerprint, width, K, the fusion matrix and the mask embeddings). Throws grove::Error naming
// the file and what is wrong.
struct FeatureDrafterTensors {
  DrafterKind kind = DrafterKind::kFeature;
  int32_t masks = 0;                       // K; 0 for the autoregressive drafter
  WeightView fusion;                       // fc: 2 n_embd in, n_embd out
  const float* mask_embeddings = nullptr;  // K rows of n_embd (f32), or null
};
FeatureDrafterTensors ReadFeatureDrafterTensors(const GgufFile& drafter, const GgufFile& target);

// The first token id below n at which two files' vocabularies (tokenizer.ggml.tokens) differ, with
// both texts; -1 when they agree there or a file has none.
int32_t FirstDifferentTokenText(const GgufFile& a, const GgufFile& b, int32_t n,
                                std::string* a_text, std::string* b_text);

}  // namespace grove
