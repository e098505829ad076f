// Batched verification verifies the trees of every sequence in flight in one target forward, so a
// tree's worth depends on how many share the forward. For k sequences with trees of n tokens and
// d levels, a sequence step costs
//
//   t(k n) / k  +  o  +  (d - 1) c / min(k, P)
//
// its share of the forward, the step's overhead besides forward and drafting (accepting,
// streaming), and its drafting: c per draft level, the k lanes drafting in parallel on P cores
// while the round waits for them (scheduler.cc). A plain step (n = 1) pays t(k) / k + o only. It
// yields G(n, d) tokens, G from the acceptance vector. The table holds, for k = 1..max sequences,
// the Sequoia tree of the best tokens per second, or none (plain steps) where no tree beats plain
// steps, with at most node_budget tokens in a forward and never more nodes than the tree chosen for
// one sequence alone (whose buffers every session reserved).
//
// Everything is measured while serving (Observe): t(m) where forwards of m tokens ran (elsewhere
// the curve measured at start, scaled by how much slower the observed forwards were than it said:
// serving's own threads share the cores), o, c, and the acceptance vector from the trees verified
// (ObserveTree: PositionalAcceptance, the start vector as kPriorWeight trees, observations fading
// with a half-life of kHalfLifeTrees trees), from which the Sequoia table is rebuilt. The first
// table uses the start curve, t(1) for o, the draft's cost measured at start for c, and the start
// vector.
//
// Why the vector and not one factor on G: with a ratio r of accepted nodes to those expected, G =
// 1 + r (G_start - 1) kept the start vector's shapes and priced a deep chain's last nodes as if
// they were reached r times as often as its first: on Game of 24 prompts (the bundled pair's first
// guess right about half as often as on stories, r 0.4-0.6) every sequence kept a chain of 10
// nodes, while chains of 4 or Sequoia trees of 6 served 14-15% faster.
//
// The positional model overrates deep nodes where acceptance falls with depth (on Game of 24
// prompts with the bundled mixture the table flipped between a chain of 5 and one of 10 at nearly
// every update, and the chain of 5 served 15% faster there), so each tree is priced at G(n, d)
// times the ratio of the tokens trees of d levels gave to those the model expected of them
// (speculate/depth_calibration.h, fed by the same trees; kDepthPriorTokens tokens of ratio 1).
//
// Why the parts are kept apart: with one overhead for everything (drafting included) charged to
// plain steps too, plain steps looked dearer than they are; at 16 clients that chose trees that
// served 0.94x as fast as plain steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "speculate/depth_calibration.h"
#include "speculate/positional_acceptance.h"
#include "speculate/sequoia.h"
#include "speculate/token_tree.h"

namespace grove {

struct StepCosts {
  double overhead_seconds = 0.0;         // o: per sequence step, besides forward and drafting
  double draft_seconds_per_level = 0.0;  // c: one draft level of one sequence, on one core
};

// What one round of batched verification did.
struct RoundObservation {
  int32_t sequences = 0;  // k: the steps (trees or plain) its forward verified
  int32_t rows = 0;       // the forward's tokens
  double forward_seconds = 0.0;
  double draft_wait_seconds = 0.0;  // waiting for the round's drafts
  double other_seconds = 0.0;       // the rest of the round (batch, accepting, streaming)
  int32_t draft_levels = 0;         // the depths of the round's trees, summed
};

class ConcurrencyTrees {
 public:
  static constexpr int kRoundsPerUpdate = 64;
  static constexpr double kPriorWeight = 32.0;
  static constexpr double kHalfLifeTrees = 128.0;
  static constexpr int32_t kRanks = PositionalAcceptance::kPlannedRanks;
  static constexpr double kDepthPriorTokens = 32.0;

  // curve: t(n) up to at least the largest forward; acceptance: p_k; max_size: tokens (root
  // included) of the tree for one sequence; max_concurrency >= 1; drafting_cores: P >= 1;
  // draft_seconds_per_level: c until measured.
  ConcurrencyTrees(VerifyCostCurve curve, std::vector<double> acceptance, int32_t max_size,
                   int32_t max_concurrency, int32_t node_budget, int32_t drafting_cores,
                   double draft_seconds_per_level);

  // Folds a round into the measurements (running means); every kRoundsPerUpdate rounds, rechooses
  // the trees. True when it did.
  bool Observe(const RoundObservation& round);
  // One sequence step on one of this table's trees: the tree verified and its accepted nodes.
  void ObserveTree(const TokenTree& tree, std::span<const int32_t> accepted);
  // Rechooses every tree for these costs (negative ones count as 0) and the measurements so far.
  void Update(StepCosts costs);
  // The tree for each of k sequences (clamped to 1..max_concurrency); empty: plain steps.
  const TokenTree& For(int32_t k) const;
  const StepCosts& costs() const { return costs_; }
  std::span<const double> acceptance() const { return acceptance_; }
  // One line for diagnostics: the measurements, the tokens trees of each depth gave over those the
  // vector expected, t(m) as served where forwards of m tokens ran ("m:ms(forwards)"), and each
  // k's tree ("k:nodes/depth", "k:-": plain).
  std::string Describe() const;
  // t(n) as served (ServedSeconds) at the start curve's sizes and wherever forwards were observed
  // often enough: what a session's own choices (a cheap step's chain, a tail) should price rows
  // at. A copy: it allocates.
  VerifyCostCurve ServedCurve() const;

 private:
  // The observed forwards' mean ratio to the start curve (1 before any).
  double ServedScale() const;
  // t(m) as served: observed where forwards of m tokens ran often enough, else the start curve
  // times `scale` (ServedScale, computed once per Update).
  double ServedSeconds(int32_t m, double scale) const;
  // G(n, d) as served: the table's value times the served ratio of d levels' trees.
  double ServedTokens(int32_t n, int32_t d) const;

  VerifyCostCurve curve_;  // t(n), measured at start
  PositionalAcceptance observed_;
  DepthCalibration by_depth_;       // the same trees, by depth
  std::vector<double> acceptance_;  // p_k the table was built from
  SequoiaTable table_;
  int32_t max_size_ = 1;
  int32_t node_budget_ = 1;
  int32_t drafting_cores_ = 1;
  StepCosts costs_;
  std::vector<double> served_;         // [m]: running mean of forwards of m tokens
  std::vector<int32_t> served_count_;  // [m]: forwards of m tokens observed
  int64_t rounds_ = 0;
  std::vector<TokenTree> trees_;  // [k - 1]
};

}  // namespace grove
