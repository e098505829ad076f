// grove bench --spec: plain decoding and each tree spec over the same prompts, repeated, in one run
// (so ratios compare like with like on a noisy machine); checks at temperature 0 that every spec's
// output equals plain decoding token for token.
#pragma once

#include <string>
#include <vector>

namespace grove::cli {

struct SpecBenchOptions {
  std::vector<std::string> specs;  // --spec, repeatable
  std::string draft;               // GGUF path or "ngram"
  std::string prompts;             // prompt file; empty: a built-in set
  std::string accept;              // acceptance vector for sequoia specs
  std::string profile;             // verify profile for sequoia:auto
  float temperature = 0.0f;
  int32_t n_predict = 128;
};

// Returns false if a greedy spec's output differed from plain decoding (a losslessness failure).
bool RunSpecBench(const SpecBenchOptions& o, const std::string& model, int threads, int repetitions,
                  bool json, uint64_t seed);

}  // namespace grove::cli
