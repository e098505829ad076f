// What a drafter file says about itself. A feature drafter (speculate/feature_drafter.h) is a
// one-layer llama GGUF that reads one particular target's hidden states, so its file names its kind
// and that target: the target's name, and a fingerprint of the tensors the drafter shares with it
// (embedding, final norm, head) and of the target's last layer, whose output is the feature.
// Pairing it with any other target is refused with both names.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace grove
