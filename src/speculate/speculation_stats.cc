#include "speculate/speculation_stats.h"

namespace grove {

std::vector<double> SpeculationStats::acceptance_by_depth() const {
  std::vector<double> out;
  for (std::size_t d = 0; d < reached_depth.size() && reached_depth[d] > 0; ++d) {
    const int64_t accepted = d < accepted_at_depth.size() ? accepted_at_depth[d] : 0;
    out.push_back(static_cast<double>(accepted) / static_cast<double>(reached_depth[d]));
  }
  return out;
}

void SpeculationStats::CountDepths(std::size_t depth, std::size_t accepted) {
  if (reached_depth.size() < depth) {
    reached_depth.resize(depth, 0);
    accepted_at_depth.resize(depth, 0);
  }
  for (std::size_t d = 0; d < depth; ++d) ++reached_depth[d];
  for (std::size_t d = 0; d < accepted && d < depth; ++d) ++accepted_at_depth[d];
}

namespace {

void AddCounts(std::vector<int64_t>& into, const std::vector<int64_t>& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (std::size_t i = 0; i < from.size(); ++i) into[i] += from[i];
}

}  // namespace

SpeculationStats& SpeculationStats::operator+=(const SpeculationStats& s) {
  steps += s.steps;
  plain_steps += s.plain_steps;
  prompt_tokens += s.prompt_tokens;
  cached_prompt_tokens += s.cached_prompt_tokens;
  generated += s.generated;
  tree_nodes += s.tree_nodes;
  verify_experts += s.verify_experts;
  verify_expert_layers += s.verify_expert_layers;
  cheap_steps += s.cheap_steps;
  cheap_nodes += s.cheap_nodes;
  tail_steps += s.tail_steps;
  tail_nodes += s.tail_nodes;
  tail_accepted += s.tail_accepted;
  prefill_seconds += s.prefill_seconds;
  measure_seconds += s.measure_seconds;
  total_seconds += s.total_seconds;
  times += s.times;
  AddCounts(accepted_at_depth, s.accepted_at_depth);
  AddCounts(reached_depth, s.reached_depth);
  AddCounts(first_rank, s.first_rank);
  return *this;
}

}  // namespace grove
