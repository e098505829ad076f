#include "speculate/mixture_chain_learning.h"

#include <cmath>

#include "base/error.h"

namespace grove {

FadedRates::FadedRates(int32_t depths, double prior, double prior_weight, double half_life)
    : prior_(prior),
      prior_weight_(prior_weight),
      fade_(std::exp2(-1.0 / half_life)),
      tried_(static_cast<std::size_t>(depths), prior_weight),
      accepted_(tried_.size(), prior_weight * prior),
      rates_(tried_.size(), prior) {}

void FadedRates::Fade() {
  for (std::size_t k = 0; k < tried_.size(); ++k) {
    tried_[k] = prior_weight_ + fade_ * (tried_[k] - prior_weight_);
    accepted_[k] = prior_weight_ * prior_ + fade_ * (accepted_[k] - prior_weight_ * prior_);
  }
}

void FadedRates::Add(int32_t k, bool accepted) {
  if (k < 0 || static_cast<std::size_t>(k) >= tried_.size()) return;
  tried_[static_cast<std::size_t>(k)] += 1.0;
  accepted_[static_cast<std::size_t>(k)] += accepted ? 1.0 : 0.0;
}

std::span<const double> FadedRates::rates() {
  for (std::size_t k = 0; k < tried_.size(); ++k) rates_[k] = accepted_[k] / tried_[k];
  return rates_;
}

namespace {

FadedRates ChainRates() {
  return FadedRates(ChainLearning::kChainDepths, ChainLearning::kChainPrior,
                    ChainLearning::kChainPriorWeight, ChainLearning::kChainHalfLifeSteps);
}

}  // namespace

ChainLearning::ChainLearning()
    : chain_rates_{ChainRates(), ChainRates(), ChainRates()},
      tail_rates_(kChainDepths, kTailPrior, kTailPriorWeight, kTailHalfLifeSteps),
      tail_reach_(kChainDepths) {}

std::span<const double> ChainLearning::tail_rates() {
  const std::span<const double> continued = tail_rates_.rates();
  double reach = 1.0;
  for (std::size_t k = 0; k < continued.size(); ++k) tail_reach_[k] = reach *= continued[k];
  return tail_reach_;
}

void ChainLearning::LearnChain(int root_class, const TokenTree& tree,
                               std::span<const int32_t> accepted) {
  // A cheap step is one a stand-in was found for (MemberChoice::Decide).
  GROVE_CHECK(root_class >= 0, "drafter mixture: a cheap step without a root class");
  FadedRates& chain_rates = chain_rates_[static_cast<std::size_t>(root_class)];
  chain_rates.Fade();
  // Each accepted depth was tried and accepted; the depth below the path, if the tree went on
  // there, was tried and rejected.
  const auto depths = static_cast<int32_t>(accepted.size());
  for (int32_t k = 0; k < depths; ++k) chain_rates.Add(k, true);
  const int32_t last = accepted.empty() ? -1 : accepted.back();
  if (!tree.children(last).empty()) chain_rates.Add(depths, false);
}

void ChainLearning::LearnStandInChain(int root_class, const MixtureMember& m, const TokenTree& tree,
                                      std::span<const int32_t> accepted, int32_t next_token) {
  // What the stand-in's chain (its first choices) would have given on this step: the target's
  // tokens are the path's whatever was drafted, so its chain's node at depth j + 1 is accepted
  // when its first choices at the path's nodes up to depth j were the tokens that followed them.
  // As far as the stand-in expanded the path (the planned tree's inner nodes, a tail's); deeper,
  // nothing is known.
  FadedRates& chain_rates = chain_rates_[static_cast<std::size_t>(root_class)];
  chain_rates.Fade();
  for (std::size_t j = 0; j <= accepted.size(); ++j) {
    const std::size_t slot = j == 0 ? 0 : static_cast<std::size_t>(accepted[j - 1]) + 1;
    if (m.FirstChoice(slot) == MixtureMember::kNotExpanded) return;
    const int32_t followed = j < accepted.size() ? tree.node(accepted[j]).token : next_token;
    const bool right = m.first_choice[slot] == followed;
    chain_rates.Add(static_cast<int32_t>(j), right);
    if (!right) return;
  }
}

void ChainLearning::LearnTail(int32_t tail_from, const TokenTree& tree,
                              std::span<const int32_t> accepted) {
  // Every node below the planned depth was proposed (the tail ends where nobody is confident);
  // it was accepted when the path reached its depth. A node past the first counts where its
  // parent was accepted.
  const auto reached = static_cast<int32_t>(accepted.size());
  for (const TreeNode& node : tree.nodes()) {
    const int32_t place = node.depth - tail_from - 1;
    if (place == 0 || (place > 0 && node.depth - 1 <= reached)) {
      tail_rates_.Add(place, node.depth <= reached);
    }
  }
}

}  // namespace grove
