// How the tree-of-thought search sees a language model: text in, text out, a whole set of
// generations at a time. Tokenizing, sampling and scheduling the set on the model (batching, KV
// cache sharing, speculation) are the generator's business, not the search's.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace grove {

struct GenerationRequest {
  std::string prompt;     // text; the generator tokenizes it
  uint64_t sequence = 0;  // RNG key of this generation (same key + same prompt -> same text under
                          // every scheduling policy)
  int32_t max_tokens = 96;
  int32_t shares_prompt_with = -1;  // index of an earlier request of the same call with the
                                    // identical prompt (the generator may fork its KV cache)
};

// Runs a set of generations together (the scheduler, under one policy) and returns their texts, in
// order: one text per request, the continuation only (not the prompt).
using GenerateFn = std::function<std::vector<std::string>(std::span<const GenerationRequest>)>;

}  // namespace grove
