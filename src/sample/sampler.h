// From logits to a token: temperature, then top-k, top-p and min-p (the order vLLM and Hugging Face
// use), then one draw from the counter-based RNG. Temperature 0 is greedy (argmax, lowest id on ties).
// Every function here is pure in its inputs (contract 4); verification rules reuse Distribution so the
// draft and target distributions are computed exactly as plain sampling computes them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/rng.h"

namespace grove {

struct SamplerParams {
  float temperature = 0.8f;
  int32_t top_k = 40;      // 0: off
  float top_p = 0.95f;     // 1: off
  float min_p = 0.05f;     // 0: off
  uint64_t seed = 0;

  bool greedy() const { return temperature == 0.0f; }
  // Throws grove::Error naming the first impossible value (e.g. "top-p 2 is outside [0, 1]").
  void Validate() const;
};

// Reusable buffers so sampling in the token loop does not allocate after the first call.
class Sampler {
 public:
  explicit Sampler(SamplerParams params);
  const SamplerParams& params() const { return params_; }

  // The distribution plain sampling draws from, as dense probabilities over the vocabulary
  // (zeros outside the kept set). For temperature 0 it is one-hot at the argmax.
  void Distribution(std::span<const float> logits, std::span<float> probs);

  // Samples a token for (sequence, position); draw distinguishes several draws at one position.
  int32_t Sample(std::span<const float> logits, uint64_t sequence, uint64_t position, uint32_t draw = 0);

  // Inverse-CDF draw from a probability vector with one uniform number u in [0, 1).
  static int32_t DrawFrom(std::span<const float> probs, double u);
  static int32_t Argmax(std::span<const float> logits);

 private:
  SamplerParams params_;
  CounterRng rng_;
  std::vector<float> probs_;
  std::vector<int32_t> order_;
};

}  // namespace grove
