// How a mixture's router turns its logits into each row's experts and weights (ops/experts.h), a
// family's choice (model/family.h).
#pragma once

#include <cstdint>

namespace grove {

enum class RouterRule : uint8_t {
  kSoftmaxTopKNormalized,  // softmax over all experts, top k, renormalised (Qwen3-MoE, Qwen3.5)
  kTopKSoftmax,            // top k of the logits, then a softmax over those k (gpt-oss)
};

}  // namespace grove
