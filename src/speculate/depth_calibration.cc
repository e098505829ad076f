#include "speculate/depth_calibration.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace grove {

DepthCalibration::DepthCalibration(int32_t max_levels, double prior_tokens, double half_life_trees)
    : records_(static_cast<std::size_t>(std::max(max_levels, 1)) + 1),
      prior_tokens_(prior_tokens),
      half_life_trees_(half_life_trees),
      at_depth_(records_.size(), 0.0) {
  GROVE_CHECK(max_levels >= 2 && prior_tokens > 0.0 && half_life_trees > 0.0,
              "depth calibration: ", max_levels, " levels, prior ", prior_tokens,
              " tokens, half-life ", half_life_trees);
}

double DepthCalibration::Fade(const Record& record) const {
  return std::exp2(-static_cast<double>(trees_ - record.tick) / half_life_trees_);
}

void DepthCalibration::Observe(const TokenTree& tree, std::span<const int32_t> accepted,
                               std::span<const double> acceptance) {
  if (tree.empty()) return;
  ++trees_;
  // Level order: a node's parent comes before it.
  path_prob_.resize(static_cast<std::size_t>(tree.size()));
  std::fill(at_depth_.begin(), at_depth_.end(), 0.0);
  const auto max_depth = static_cast<int32_t>(records_.size()) - 2;  // node depth of the deepest
  for (int32_t v = 0; v < tree.size(); ++v) {
    const TreeNode& node = tree.node(v);
    const auto rank = static_cast<std::size_t>(tree.rank(v));
    const double p = rank < acceptance.size() ? acceptance[rank] : 0.0;
    const double path =
        p * (node.parent < 0 ? 1.0 : path_prob_[static_cast<std::size_t>(node.parent)]);
    path_prob_[static_cast<std::size_t>(v)] = path;
    if (node.depth <= max_depth) at_depth_[static_cast<std::size_t>(node.depth)] += path;
  }
  const int32_t deepest = std::min(tree.depth(), max_depth);
  const auto reached = static_cast<int32_t>(accepted.size());
  double expected = 1.0;
  for (int32_t j = 1; j <= deepest; ++j) {
    expected += at_depth_[static_cast<std::size_t>(j)];
    Record& record = records_[static_cast<std::size_t>(j) + 1];  // the cut has j + 1 levels
    const double fade = Fade(record);
    record.expected = record.expected * fade + expected;
    record.given = record.given * fade + 1.0 + std::min(reached, j);
    record.tick = trees_;
  }
}

double DepthCalibration::Ratio(int32_t levels) const {
  for (auto at = static_cast<std::size_t>(
           std::clamp<int32_t>(levels, 2, static_cast<int32_t>(records_.size()) - 1));
       at >= 2; --at) {
    const Record& record = records_[at];
    if (record.expected == 0.0) continue;
    const double fade = Fade(record);
    return (prior_tokens_ + fade * record.given) / (prior_tokens_ + fade * record.expected);
  }
  return 1.0;
}

}  // namespace grove
