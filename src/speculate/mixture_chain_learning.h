// What a drafter mixture (speculate/drafter_mixture.h) learns of the chains its cheap members
// draft: the record the step planner prices a cheap step's chain and a tail by
// (speculate/draft_outlook.h).
//
// A cheap step's record, the chance that the chain's node at each depth is accepted when its
// parent was, is learnt on every step of its root class (mixture_member_choice.h): on a cheap one
// from its chain, on a dear one from the stand-in's first choices along the path the target took,
// as far as the stand-in expanded it (the target's tokens are the same whatever was drafted).
// Learnt on cheap steps alone, the rates stayed at their prior wherever the dear way won, and a
// chain that would have won was never tried: on repeated requests the suffix member's chains of 14
// nodes, once tried, gave 15 tokens a step at 4.3 a millisecond, where the draft model's trees of
// 11 had given 7.2 at 1.8 and those with a tail 13.6 at 3.4 (one server each; paired over 5
// rounds, the class served 1.09x as fast).
//
// A tail's record is the chance a tail node is accepted when its parent was (the first one: when
// proposed). Every decided step fades the evidence, tail or not, so a tail that stopped paying is
// tried again after some hundred steps: the text may repeat by then. The chance that the k-th node
// is accepted is the product of the first k; learnt directly by place, places that tails seldom
// reached kept the prior's 0.5 and priced the 20th tail node as high as the first (on Game of 24
// prompts tails of 18-19 nodes gave 0.55 tokens a millisecond where those of 6-8 gave 1.5).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "speculate/mixture_member.h"
#include "speculate/mixture_member_choice.h"
#include "speculate/token_tree.h"

namespace grove {

// Acceptance by depth, learnt from counts that fade toward a prior: rates()[k] is the chance the
// (k + 1)-th node is accepted (for chains: when its parent was).
class FadedRates {
 public:
  FadedRates(int32_t depths, double prior, double prior_weight, double half_life);
  void Fade();  // one step of the half-life
  void Add(int32_t k, bool accepted);
  std::span<const double> rates();

 private:
  double prior_, prior_weight_, fade_;
  std::vector<double> tried_, accepted_, rates_;
};

class ChainLearning {
 public:
  // Depths whose continue rates cheap steps learn (deeper ones take the last), the rates assumed
  // before any evidence (as kChainPriorWeight chains), and their memory in cheap steps.
  static constexpr int32_t kChainDepths = 32;
  static constexpr double kChainPrior = 0.8;
  static constexpr double kChainPriorWeight = 2.0;
  static constexpr double kChainHalfLifeSteps = 64.0;
  // Tails: the chance a tail node is accepted when its parent was, assumed before any evidence
  // (as kTailPriorWeight nodes), and the memory in steps.
  static constexpr double kTailPrior = 0.5;
  static constexpr double kTailPriorWeight = 2.0;
  static constexpr double kTailHalfLifeSteps = 128.0;

  ChainLearning();

  // q_k of a cheap step of `root_class` (the last one stands for every deeper k).
  std::span<const double> continue_rates(int root_class) {
    return chain_rates_[static_cast<std::size_t>(root_class)].rates();
  }
  // Q_k, the chance the k-th tail node is accepted; valid until the next call.
  std::span<const double> tail_rates();

  // A cheap step's chain of `root_class` and its accepted nodes.
  void LearnChain(int root_class, const TokenTree& tree, std::span<const int32_t> accepted);
  // A dear step of `root_class`: the chain the stand-in would have drafted (its first choices).
  void LearnStandInChain(int root_class, const MixtureMember& stand_in, const TokenTree& tree,
                         std::span<const int32_t> accepted, int32_t next_token);
  // Every decided step fades the tails' evidence.
  void FadeTails() { tail_rates_.Fade(); }
  // A step whose chain went on past tail_from planned nodes with a tail.
  void LearnTail(int32_t tail_from, const TokenTree& tree, std::span<const int32_t> accepted);

 private:
  // By root class and depth, the chance a chain's node is accepted when its parent was.
  std::array<FadedRates, MemberChoice::kRootClasses> chain_rates_;
  // By place in the tail, the chance a node is accepted when its parent was; and their products.
  FadedRates tail_rates_;
  std::vector<double> tail_reach_;
};

}  // namespace grove
