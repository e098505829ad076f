#include "speculate/positional_acceptance.h"

#include <algorithm>

#include "base/error.h"

namespace grove {

PositionalAcceptance::PositionalAcceptance(int32_t ranks, std::span<const double> prior,
                                           double weight)
    : tried_(static_cast<std::size_t>(ranks), weight), accepted_(tried_.size(), 0.0) {
  GROVE_CHECK(ranks >= 1 && weight >= 0.0, "positional acceptance: ", ranks, " ranks, weight ",
              weight);
  for (std::size_t k = 0; k < accepted_.size() && k < prior.size(); ++k) {
    accepted_[k] = weight * prior[k];
  }
}

void PositionalAcceptance::Fade(double factor) {
  for (std::size_t k = 0; k < tried_.size(); ++k) {
    tried_[k] *= factor;
    accepted_[k] *= factor;
  }
}

void PositionalAcceptance::Observe(const TokenTree& tree, std::span<const int32_t> accepted) {
  const auto observe = [&](int32_t node, int32_t accepted_rank) {
    const int32_t m = std::min<int32_t>(static_cast<int32_t>(tree.children(node).size()), ranks());
    for (int32_t k = 0; k < m; ++k) tried_[static_cast<std::size_t>(k)] += 1.0;
    if (accepted_rank >= 0 && accepted_rank < ranks()) {
      accepted_[static_cast<std::size_t>(accepted_rank)] += 1.0;
    }
  };
  int32_t node = -1;
  for (int32_t next : accepted) {
    observe(node, tree.rank(next));
    node = next;
  }
  observe(node, -1);
}

void PositionalAcceptance::Estimate(std::span<double> out) const {
  GROVE_CHECK(out.size() == tried_.size(), "positional acceptance: ", out.size(), " values for ",
              tried_.size(), " ranks");
  double sum = 0.0;
  for (std::size_t k = 0; k < tried_.size(); ++k) {
    out[k] = tried_[k] > 0 ? std::clamp(accepted_[k] / tried_[k], 0.0, 1.0) : 0.0;
    sum += out[k];
  }
  if (sum > 1.0) {
    for (double& p : out) p /= sum * (1.0 + 1e-9);
  }
}

}  // namespace grove
