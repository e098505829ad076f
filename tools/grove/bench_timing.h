// The timed tests of `grove bench`, each a sequence of Model::Forward calls on random token ids
// (the weights are read the same whatever the ids, and random ids need no tokenizer):
//
//   ppN  prompt processing: one forward over N tokens from an empty cache (split into max_batch
//        chunks when N is larger), logits for the last token only, as a prefill does;
//   tgN  generation: N single-token forwards after a short untimed prompt;
//   t(n) verification: one forward over a chain of n tokens, every row wanting logits, after a
//        prefix of committed tokens; the cache is truncated back to the prefix after each forward.
//
// Timing is wall-clock; the caller repeats and summarises.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "model/model.h"

namespace grove::cli {

// Untimed prompt before a generation test: long enough that attention reads a cache (as in real
// decoding), short enough not to change what the test measures.
inline constexpr int32_t kGeneratePrefix = 16;

struct TimedRun {
  double seconds = 0;
  int32_t forwards = 0;  // Forward calls, each reading every weight once but a mixture's experts
  int64_t experts_read = 0;  // a mixture's: experts those calls read, summed over expert layers
};

class BenchTimer {
 public:
  // The model's sequence 0 is used; its cache is cleared by each test.
  BenchTimer(Model& model, uint64_t seed);

  TimedRun Prompt(int32_t n_tokens);
  TimedRun Generate(int32_t n_tokens);

  // Per n, one sample per repetition: the seconds of one verification forward, and on a mixture
  // the experts it read per expert layer (random tokens route about uniformly, so this is the
  // union a chain of n unrelated tokens reads, an upper bound for text).
  struct CurveSamples {
    std::vector<double> seconds;
    std::vector<double> experts_per_layer;
  };
  // samples[i] for ns[i]. Repetitions run as rounds over all n, so slow drift of a shared machine
  // (another job starting, the clock changing) moves every n alike and leaves the ratios
  // t(n)/t(1) meaningful.
  std::vector<CurveSamples> VerifyCurve(std::span<const int32_t> ns, int32_t n_prefix,
                                        int repetitions);

 private:
  // Appends a chain of n random tokens from the cache's current length.
  void AddRandomChain(int32_t n, bool all_logits);
  // Returns the experts its forwards read (a mixture's; else 0).
  int64_t Prefill(int32_t n_tokens);

  Model& model_;
  std::mt19937 rng_;
  std::uniform_int_distribution<int32_t> token_;
  Batch batch_;
  std::vector<int32_t> chain_;
};

}  // namespace grove::cli
