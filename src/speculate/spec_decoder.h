// The speculative decoding loop: draft a tree -> one target Forward over root + tree -> verify ->
// commit the accepted tokens and the next one -> compact both KV caches -> repeat.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/model.h"
#include "sample/sampler.h"
#include "speculate/drafter.h"
#include "speculate/tree_builder.h"
#include "speculate/verify.h"

namespace grove {

struct SpecStats {
  int64_t steps = 0;
  int64_t prompt_tokens = 0;
  int64_t generated = 0;         // tokens emitted (accepted + next), the stop token included
  int64_t tree_nodes = 0;        // draft nodes verified, summed over steps
  double prefill_seconds = 0.0;  // target prompt + drafter Begin
  double draft_seconds = 0.0;
  double verify_seconds = 0.0;   // target forward + verification
  double total_seconds = 0.0;    // generation only (prefill excluded)
  // accepted_at_depth[d - 1]: steps that accepted a node at depth d; reached_depth[d - 1]: steps
  // whose tree had a node at depth d (acceptance by depth = accepted / reached).
  std::vector<int64_t> accepted_at_depth;
  std::vector<int64_t> reached_depth;
  // first_rank[0]: steps that accepted no node; first_rank[k]: steps whose accepted depth-1 node was
  // the root's k-th child. With a star tree this is Sequoia's on-policy acceptance estimate (E1).
  std::vector<int64_t> first_rank;

  // Mean tokens per step: accepted + 1 (τ).
  double tau() const { return steps ? static_cast<double>(generated) / steps : 0.0; }
  double tokens_per_second() const { return total_seconds > 0 ? generated / total_seconds : 0.0; }
};

struct SpecOptions {
  VerifyRule rule = VerifyRule::kGreedy;
  SamplerParams sampling;
  int32_t n_predict = 128;
  bool stop_at_eog = true;  // needs the target's tokenizer
  uint64_t sequence = 0;    // counter key of the RNG (a server gives each request its own)
};

class SpecDecoder {
 public:
  // Throws grove::Error if the rule, the builder's draw and the tree would not be lossless, or the
  // drafter's vocabulary differs from the target's.
  SpecDecoder(Model& target, Drafter& drafter, TreeBuilder& builder, const SpecOptions& options);

  // Generates after `prompt` (at least one token), calling on_token(token) for each committed token
  // in order; on_token returns false to stop. Returns the generated tokens.
  std::vector<int32_t> Generate(std::span<const int32_t> prompt, const std::function<bool(int32_t)>& on_token);

  const SpecStats& stats() const { return stats_; }

 private:
  Model& target_;
  Drafter& drafter_;
  TreeBuilder& builder_;
  SpecOptions options_;
  Sampler sampler_;
  Verifier verifier_;
  CounterRng rng_;
  Batch batch_;
  std::vector<float> target_rows_;  // (max_nodes + 1, n_vocab)
  VerifyResult result_;
  std::vector<int32_t> accepted_tokens_;
  std::vector<int32_t> kept_slots_;
  SpecStats stats_;
};

struct PlainTiming {
  double prefill_seconds = 0.0;
  double generation_seconds = 0.0;
};

// Plain decoding of the same target (the baseline of --compare and `grove bench --spec`): the same
// sampler and RNG keys, so at temperature 0 it must produce exactly the speculative output.
std::vector<int32_t> GeneratePlain(Model& target, std::span<const int32_t> prompt, const SpecOptions& options,
                                   const std::function<bool(int32_t)>& on_token, PlainTiming* timing = nullptr);

}  // namespace grove
