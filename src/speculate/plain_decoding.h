// Plain decoding of the target, one token per forward: the baseline every speculative figure is
// compared with (`--compare`, `grove bench --spec`). It samples with the same sampler and the same
// RNG counters as the verification rules, so at temperature 0 speculative output must equal it
// token for token, and target-sample verification reproduces it at any temperature.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/model.h"
#include "sample/sampler.h"
#include "speculate/session.h"

namespace grove {

struct PlainTiming {
  int32_t cached_prompt_tokens = 0;  // prompt tokens kept in the cache (KeepCachedPrompt)
  double prefill_seconds = 0.0;
  double generation_seconds = 0.0;
};

// Generates after `prompt` (at least one token) in the target cache options.target_seq, calling
// on_token for each token (the stop token included); on_token returns false to stop. Stops as a
// session does: n_predict tokens, an end-of-generation token (options.stop_at_eog), or a full
// context.
std::vector<int32_t> GeneratePlain(Model& target, std::span<const int32_t> prompt,
                                   const SamplerParams& sampling, const SessionOptions& options,
                                   const std::function<bool(int32_t)>& on_token,
                                   PlainTiming* timing = nullptr);

}  // namespace grove
