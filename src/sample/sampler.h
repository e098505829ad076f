// From logits to a token: temperature, then top-k, top-p and min-p (the order vLLM and Hugging Face
// use), then one draw from the counter-based RNG. Temperature 0 is greedy (argmax, lowest id on
// ties). Every function here is pure in its inputs (contract 4); verification rules reuse
// Distribution so the draft and target distributions are computed exactly as plain sampling
// computes them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/rng.h"

namespace grove {

struct SamplerParams {
  float temperature = 0.8f;
  int32_t top_k = 40;   // 0: off
  float top_p = 0.95f;  // 1: off
  float min_p = 0.05f;  // 0: off
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
  // (zeros outside the kept set). For temperature 0 it is one-hot at the argmax. O(vocab): the
  // filters select instead of sorting the vocabulary (top-p sorts only the head it keeps).
  void Distribution(std::span<const float> logits, std::span<float> probs);

  // Samples a token for (sequence, position); draw distinguishes several draws at one position.
  int32_t Sample(std::span<const float> logits, uint64_t sequence, uint64_t position,
                 uint32_t draw = 0);

  // Inverse-CDF draw from a probability vector with one uniform number u in [0, 1).
  static int32_t DrawFrom(std::span<const float> probs, double u);
  static int32_t Argmax(std::span<const float> logits);

 private:
  SamplerParams params_;
  CounterRng rng_;
  struct Candidate {
    int32_t token;
    float value;
  };
  // The steps of Distribution: each returns how many candidates it keeps, a prefix of
  // order_ / values_ (the candidate's token and its exp((logit - max) / T)).
  int32_t KeepTopK(std::span<const float> logits);
  int32_t KeepAll(int32_t n);
  void ScaledExp(std::span<const float> logits, int32_t kept, bool ordered);
  int32_t KeepMinPOrdered(int32_t kept);
  int32_t KeepMinPScanned(int32_t kept);
  int32_t KeepTopP(std::span<const float> logits, int32_t kept, double sum, bool ordered);

  std::vector<float> probs_;
  int32_t kept_ = 0;              // Distribution's kept candidates: order_[0, kept_) (0: one-hot)
  std::vector<int32_t> order_;    // candidate token ids
  std::vector<float> values_;     // exp((logit - max) / T) of each candidate
  std::vector<Candidate> pairs_;  // top-p's partially sorted candidates
};

// Writes into `tokens` the k best tokens of `scores` (probabilities or logits) in the order (score
// descending, lower id first on ties), skipping tokens whose score is not above `floor` (0 for
// probabilities: a token without mass is never proposed; -inf for logits). Fewer than k when fewer
// qualify. O(vocab) for the small k of draft trees (a sorted insertion into k entries, rarely
// taken once they are full); no allocation once `tokens` has capacity k + 1.
void TopTokens(std::span<const float> scores, int32_t k, float floor, std::vector<int32_t>& tokens);

}  // namespace grove
