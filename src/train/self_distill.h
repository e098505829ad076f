// Self-distilled training text (ParallelSpec §5.3, after EAGLE): the target continues the openings
// of the corpus's documents, and a drafter trained on what the target itself writes learns the
// distribution it will draft for. Several documents are decoded at once (one batched target
// forward per token, each in its own KV-cache slot), which costs little more than one on a target
// whose forward is bound by reading its weights.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "sample/sampler.h"

namespace grove {

struct SelfDistillOptions {
  int32_t max_new_tokens = 256;  // per document
  // Temperature 0 (greedy), as the paper's regenerated data; > 0 samples, keyed per document.
  SamplerParams sampling{.temperature = 0.0f};
  // Once this many tokens are generated (> 0), no further prompt is started; those in flight end
  // as usual, and the prompts never started get no tokens.
  int64_t token_budget = 0;
};

// Continues every prompt with the target, up to max_new_tokens or an end-of-generation token (not
// kept), decoding as many at once as the target has KV-cache slots (Model n_seq). Returns the
// tokens each prompt generated, in prompt order. `progress` (may be empty) is called after each
// batched step with the prompts finished and the tokens generated so far. Throws grove::Error on an
// empty prompt or one that leaves no room in the context.
std::vector<std::vector<int32_t>> SelfDistill(
    Model& target, std::span<const std::vector<int32_t>> prompts, const SelfDistillOptions& options,
    const std::function<void(int64_t prompts_done, int64_t tokens)>& progress = {});

}  // namespace grove
