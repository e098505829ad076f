// What a speculative generation did and where its time went: every speculative figure grove
// prints (run, bench, the scheduler, the server) is read from these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace grove {

// Where a step's time goes, in seconds summed over steps. Every speculative figure grove prints
// carries this split (its parts in kStepParts' order).
struct StepTimes {
  double draft_forward = 0.0;   // Drafter::Expand: draft model forwards (or n-gram lookups)
  double tree_building = 0.0;   // the rest of Draft(): draft distributions, children, planning
  double verify_forward = 0.0;  // the target forward over the root and the tree, less `state`
  // Of the verify forward, the target's recurrent state: committing the accepted path (replayed
  // when a rejection left it off the path run in place), rewinds, and replays of pending nodes
  // (model/recurrent_state.h). Zero on attention-only targets.
  double state = 0.0;
  double verification = 0.0;  // target distributions of the rows the rule reads, and the rule
  double cache = 0.0;         // compaction of the target and draft KV caches
  double other = 0.0;         // the rest of the step: batch building, statistics, the driver

  double total() const;
  StepTimes& operator+=(const StepTimes& t);
  StepTimes& operator/=(double d);
};

// The parts of StepTimes, as the tools name them: `key` in JSON, `label` in tables.
struct StepPart {
  const char* key;
  const char* label;
  double StepTimes::*seconds;
};
inline constexpr StepPart kStepParts[] = {
    {"draft_forward", "draft fwd", &StepTimes::draft_forward},
    {"tree_building", "tree", &StepTimes::tree_building},
    {"verify_forward", "verify fwd", &StepTimes::verify_forward},
    {"state", "state", &StepTimes::state},
    {"verification", "verification", &StepTimes::verification},
    {"cache", "cache", &StepTimes::cache},
    {"other", "other", &StepTimes::other},
};

inline double StepTimes::total() const {
  double sum = 0.0;
  for (const StepPart& p : kStepParts) sum += this->*p.seconds;
  return sum;
}
inline StepTimes& StepTimes::operator+=(const StepTimes& t) {
  for (const StepPart& p : kStepParts) this->*p.seconds += t.*p.seconds;
  return *this;
}
inline StepTimes& StepTimes::operator/=(double d) {
  for (const StepPart& p : kStepParts) this->*p.seconds /= d;
  return *this;
}

struct SpeculationStats {
  int64_t steps = 0;
  int64_t plain_steps = 0;  // steps without a tree (the plan chose plain decoding, or no room)
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // of them, kept in the target cache (not prefilled again)
  int64_t generated = 0;             // tokens emitted (accepted + next), the stop token included
  int64_t tree_nodes = 0;            // draft nodes verified, summed over steps
  // A mixture target's verify forwards: the experts they read, summed over their expert layers,
  // and those layers (forward_backend.h's ExpertsRead). A tree costs the union of its tokens'
  // experts. Sequences batched into one forward each count that forward's.
  int64_t verify_experts = 0;
  int64_t verify_expert_layers = 0;
  // Steps the drafter announced as cheap and drafted as a chain of their own depth
  // (speculate/draft_outlook.h), and those chains' nodes.
  int64_t cheap_steps = 0;
  int64_t cheap_nodes = 0;
  // Steps whose planned chain went on with a tail (draft_outlook.h), its nodes, and those of them
  // the target accepted.
  int64_t tail_steps = 0;
  int64_t tail_nodes = 0;
  int64_t tail_accepted = 0;
  double prefill_seconds = 0.0;  // target prompt + drafter Begin
  double measure_seconds = 0.0;  // the auto planner measuring the verify cost (within the steps)
  double total_seconds = 0.0;    // generation only (prefill excluded), wall clock to the end
  StepTimes times;
  // accepted_at_depth[d - 1]: steps that accepted a node at depth d; reached_depth[d - 1]: steps
  // whose tree had a node at depth d (acceptance by depth = accepted / reached).
  std::vector<int64_t> accepted_at_depth;
  std::vector<int64_t> reached_depth;
  // first_rank[0]: steps with a tree that accepted no node; first_rank[k]: steps whose accepted
  // depth-1 node was the root's k-th child. With a star tree this is Sequoia's on-policy acceptance
  // estimate (E1).
  std::vector<int64_t> first_rank;

  // Draft tokens accepted: every emitted token but the one each step's target forward adds.
  int64_t accepted() const { return generated - steps; }
  // Mean tokens per step: accepted + 1 (τ).
  double tau() const { return steps ? static_cast<double>(generated) / steps : 0.0; }
  double tokens_per_second() const { return total_seconds > 0 ? generated / total_seconds : 0.0; }
  // Mean experts a verify forward read per expert layer; 0 without experts.
  double verify_experts_per_layer() const {
    return verify_expert_layers > 0
               ? static_cast<double>(verify_experts) / static_cast<double>(verify_expert_layers)
               : 0.0;
  }
  // accepted_at_depth / reached_depth for each depth some tree reached (for a chain: the share of
  // steps that accepted at least d tokens).
  std::vector<double> acceptance_by_depth() const;
  // One verified tree of `depth` levels whose first `accepted` levels were accepted: counts
  // reached_depth and accepted_at_depth (they grow to the deepest tree seen).
  void CountDepths(std::size_t depth, std::size_t accepted);
  // Sums every count, time and per-depth count (sessions of a benchmark, choices of a request).
  SpeculationStats& operator+=(const SpeculationStats& s);
};

}  // namespace grove
