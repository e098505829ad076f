// grove bench --spec: plain decoding and each drafter x tree plan over the same prompts, repeated,
// in one run (so ratios compare like with like on a noisy machine), at each thread count. Reports
// the median tokens/s with its spread, the speedup (median of the per-repetition ratios), the
// step's time split, and the tokens/s that τ, the measured draft time and the target's verify curve
// predict. Checks at temperature 0 that every plan's output equals plain decoding token for token.
#pragma once

#include <string>
#include <vector>

#include "model/model.h"

#include "sample/sampler.h"

namespace grove::cli {

struct SpecBenchOptions {
  std::vector<std::string> specs;   // --spec, repeatable
  std::vector<std::string> drafts;  // --draft, repeatable: GGUF paths or "ngram"
  std::string prompts;              // prompt file; empty: a built-in set
  std::string accept;               // acceptance vector for sequoia plans (auto's prior)
  std::string profile;              // verify profile for sequoia:auto
  // --temp and the filters, as every command registers them (sampling_options.h); the bench's
  // default temperature is 0, where outputs are checked against plain decoding.
  SamplerParams sampling{.temperature = 0.0f};
  int32_t n_predict = 128;
  ComputeDevice device = ComputeDevice::kCpu;         // --device
  ComputeDevice draft_device = ComputeDevice::kAuto;  // --draft-device
  KvCacheType cache_type = KvCacheType::kF32;         // --cache-type
};

// Returns false if a greedy plan's output differed from plain decoding (a losslessness failure).
bool RunSpecBench(const SpecBenchOptions& o, const std::string& model,
                  const std::vector<int>& threads, int repetitions, bool json, uint64_t seed);

}  // namespace grove::cli
