#include "schedule/concurrency_trees.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace grove {
namespace {

constexpr double kWeight = 0.05;         // running means of o and c
constexpr double kForwardWeight = 0.1;   // running mean of each t(m)
constexpr int32_t kTrustedForwards = 8;  // observations before t(m) replaces the start curve
constexpr int32_t kTableDepth = 16;      // the deepest tree the table holds (levels, root included)

}  // namespace

ConcurrencyTrees::ConcurrencyTrees(VerifyCostCurve curve, std::vector<double> acceptance,
                                   int32_t max_size, int32_t max_concurrency, int32_t node_budget,
                                   int32_t drafting_cores, double draft_seconds_per_level)
    : curve_(std::move(curve)),
      observed_(kRanks, acceptance, kPriorWeight),
      by_depth_(kTableDepth, kDepthPriorTokens, kHalfLifeTrees),
      acceptance_(static_cast<std::size_t>(kRanks), 0.0),
      max_size_(max_size),
      node_budget_(std::max(node_budget, 1)),
      drafting_cores_(std::max(drafting_cores, 1)),
      served_(static_cast<std::size_t>(curve_.max_size()) + 1, 0.0),
      served_count_(served_.size(), 0),
      trees_(static_cast<std::size_t>(max_concurrency)) {
  GROVE_CHECK(max_concurrency >= 1, "concurrency trees: max_concurrency ", max_concurrency);
  Update(
      {.overhead_seconds = curve_.Seconds(1), .draft_seconds_per_level = draft_seconds_per_level});
}

bool ConcurrencyTrees::Observe(const RoundObservation& round) {
  if (round.sequences < 1) return false;
  const double k = round.sequences;
  costs_.overhead_seconds +=
      kWeight * (std::max(0.0, round.other_seconds) / k - costs_.overhead_seconds);
  // The round waited (sum of levels) c / min(k, P) for its drafts.
  if (round.draft_levels > 0) {
    const double c =
        round.draft_wait_seconds * std::min<double>(k, drafting_cores_) / round.draft_levels;
    costs_.draft_seconds_per_level += kWeight * (c - costs_.draft_seconds_per_level);
  }
  if (round.rows >= 1 && round.rows < static_cast<int32_t>(served_.size())) {
    const auto m = static_cast<std::size_t>(round.rows);
    served_[m] = served_count_[m] == 0
                     ? round.forward_seconds
                     : served_[m] + kForwardWeight * (round.forward_seconds - served_[m]);
    ++served_count_[m];
  }
  if (++rounds_ % kRoundsPerUpdate != 0) return false;
  Update(costs_);
  return true;
}

double ConcurrencyTrees::ServedScale() const {
  double ratio = 0.0;
  int32_t points = 0;
  for (std::size_t m = 1; m < served_.size(); ++m) {
    if (served_count_[m] < kTrustedForwards) continue;
    ratio += served_[m] / curve_.Seconds(static_cast<int32_t>(m));
    ++points;
  }
  return points > 0 ? ratio / points : 1.0;
}

VerifyCostCurve ConcurrencyTrees::ServedCurve() const {
  const double scale = ServedScale();
  std::vector<std::pair<int32_t, double>> points;
  std::size_t next = 0;  // the next start-curve point
  const std::span<const std::pair<int32_t, double>> start = curve_.points();
  for (int32_t m = 1; m <= curve_.max_size(); ++m) {
    const auto i = static_cast<std::size_t>(m);
    const bool sampled = next < start.size() && start[next].first == m;
    if (sampled) ++next;
    const bool served = i < served_.size() && served_count_[i] >= kTrustedForwards;
    if (sampled || served) points.emplace_back(m, ServedSeconds(m, scale));
  }
  return VerifyCostCurve(std::move(points));
}

double ConcurrencyTrees::ServedSeconds(int32_t m, double scale) const {
  const auto i = static_cast<std::size_t>(m);
  if (i < served_.size() && served_count_[i] >= kTrustedForwards) return served_[i];
  return curve_.Seconds(m) * scale;
}

void ConcurrencyTrees::ObserveTree(const TokenTree& tree, std::span<const int32_t> accepted) {
  if (tree.empty()) return;
  observed_.Fade(std::exp2(-1.0 / kHalfLifeTrees));
  observed_.Observe(tree, accepted);
  by_depth_.Observe(tree, accepted, acceptance_);
}

double ConcurrencyTrees::ServedTokens(int32_t n, int32_t d) const {
  return table_.Value(n, d) * by_depth_.Ratio(d);
}

void ConcurrencyTrees::Update(StepCosts costs) {
  costs_ = {.overhead_seconds = std::max(0.0, costs.overhead_seconds),
            .draft_seconds_per_level = std::max(0.0, costs.draft_seconds_per_level)};
  observed_.Estimate(acceptance_);
  const int32_t size = std::max(max_size_, 2);
  table_.Compute(acceptance_, size, std::min(size, kTableDepth));
  const double scale = ServedScale();
  for (std::size_t i = 0; i < trees_.size(); ++i) {
    const auto k = static_cast<int32_t>(i) + 1;
    const int32_t largest =
        std::min({max_size_, table_.max_size(), curve_.max_size() / k, node_budget_ / k});
    // Seconds per token of a plain step, then of each tree (size n root included, depth d levels
    // root included, so d - 1 draft levels); ties keep the smaller tree.
    const double o = costs_.overhead_seconds;
    double best = ServedSeconds(k, scale) / k + o;
    int32_t best_n = 1, best_d = 1;
    for (int32_t n = 2; n <= largest; ++n) {
      const double share = ServedSeconds(k * n, scale) / k + o;
      for (int32_t d = 2; d <= std::min(n, table_.max_depth()); ++d) {
        // A size or depth the best tree does not use is the smaller tree's: priced once, by the
        // size and depth it has.
        const double value = table_.Value(n, d);
        constexpr double kSame = 1e-9;
        if (value <= table_.Value(n - 1, d) + kSame || value <= table_.Value(n, d - 1) + kSame) {
          continue;
        }
        const double tokens = ServedTokens(n, d);
        const double seconds =
            share + (d - 1) * costs_.draft_seconds_per_level / std::min(k, drafting_cores_);
        if (seconds / tokens < best) {
          best = seconds / tokens;
          best_n = n;
          best_d = d;
        }
      }
    }
    trees_[i] = best_n > 1 ? table_.Tree(best_n, best_d) : TokenTree();
  }
}

std::string ConcurrencyTrees::Describe() const {
  std::string text = StrCat("step overhead ", costs_.overhead_seconds * 1e3, " ms, draft level ",
                            costs_.draft_seconds_per_level * 1e3, " ms, p1..3 ", acceptance_[0],
                            " ", acceptance_[1], " ", acceptance_[2], "; given/expected by levels");
  int32_t deepest = 1;  // levels of the table's deepest tree (root included)
  for (const TokenTree& tree : trees_) deepest = std::max(deepest, tree.depth() + 1);
  for (int32_t levels = 2; levels <= std::max(deepest, 2); ++levels) {
    text += StrCat(" ", levels, ":", by_depth_.Ratio(levels));
  }
  text += "; t(m) ms as served (forwards)";
  for (std::size_t m = 1; m < served_.size(); ++m) {
    if (served_count_[m] > 0)
      text += StrCat(" ", m, ":", served_[m] * 1e3, "(", served_count_[m], ")");
  }
  text += "; trees by concurrency";
  for (std::size_t i = 0; i < trees_.size(); ++i) {
    const TokenTree& tree = trees_[i];
    text += StrCat(" ", i + 1, ":");
    text += tree.empty() ? std::string("-") : StrCat(tree.size(), "/", tree.depth());
  }
  return text;
}

const TokenTree& ConcurrencyTrees::For(int32_t k) const {
  return trees_[static_cast<std::size_t>(std::clamp<int32_t>(k, 1, trees_.size()) - 1)];
}

}  // namespace grove
