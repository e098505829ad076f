#include "schedule/concurrency_trees.h"

#include <algorithm>

#include "base/error.h"

namespace grove {

ConcurrencyTrees::ConcurrencyTrees(VerifyCostCurve curve, std::vector<double> acceptance,
                                   int32_t max_size, int32_t max_concurrency, int32_t node_budget)
    : curve_(std::move(curve)),
      table_(SequoiaTable::Build(acceptance, std::max(max_size, 2),
                                 std::min(std::max(max_size, 2), 16))),
      max_size_(max_size),
      node_budget_(std::max(node_budget, 1)),
      trees_(static_cast<std::size_t>(max_concurrency)) {
  GROVE_CHECK(max_concurrency >= 1, "concurrency trees: max_concurrency ", max_concurrency);
  Update(curve_->Seconds(1));
}

void ConcurrencyTrees::Update(double step_overhead_seconds) {
  overhead_ = std::max(0.0, step_overhead_seconds);
  const VerifyCostCurve& curve = *curve_;
  for (std::size_t i = 0; i < trees_.size(); ++i) {
    const auto k = static_cast<int32_t>(i) + 1;
    const int32_t largest = std::min({max_size_, curve.max_size() / k, node_budget_ / k});
    if (largest < 2) {
      trees_[i] = TokenTree();
      continue;
    }
    // The search adds d levels of draft cost c; here drafting runs on the lanes' threads beside
    // the forward and what it delays the step by is in the measured overhead, so c = 0.
    std::vector<std::pair<int32_t, double>> share;
    for (int32_t n = 1; n <= largest; ++n) {
      share.emplace_back(n, curve.Seconds(k * n) / k + overhead_);
    }
    const SizeDepthChoice c = ChooseSizeAndDepth(table_, VerifyCostCurve(std::move(share)), 0.0);
    trees_[i] = c.size > 1 ? table_.Tree(c.size, c.depth) : TokenTree();
  }
}

const TokenTree& ConcurrencyTrees::For(int32_t k) const {
  return trees_[static_cast<std::size_t>(std::clamp<int32_t>(k, 1, trees_.size()) - 1)];
}

}  // namespace grove
