// Several drafters as one (issue 32's controller): every step, each member that takes part
// proposes rows for the same frontier and the mixture ranks each row's tokens by how much each
// member's word has been worth (mixture_ranking.h), so one tree holds the candidates of all of
// them. Which members take part is decided at each step's start: a cheap member (suffix
// drafting, prompt lookup) may stand in for an expensive one (a draft model) for the whole step
// (mixture_member_choice.h). What the cheap members' chains have been worth is learnt for the step
// planner to price a cheap step's chain, or a tail past a planned chain, against the planned tree
// (mixture_chain_learning.h, speculate/draft_outlook.h).
//
// Before a step's tree is chosen the mixture says whether the step will be a cheap one
// (StepOutlook::Prepare): the step planner may then draft a chain of the depth the cheap members'
// record on such steps is worth, or decline, and every member drafts the planned tree. On the
// other steps it says what a tail past a planned chain has been worth, and drafts one when asked:
// below the planned depth only the cheap members whose first choices were the path's tokens from
// the root on expand, and a row proposes their guesses only where one of them is confident (an
// empty row ends the chain).
//
// It tells which members proposed each node of a step's tree and why the step's members took part
// (NodeAttribution), and counts per member the nodes it proposed and those the target accepted.
//
// The merged rows are a ranking, not a distribution children could be sampled from. So when the
// tree builder samples children (SampleChildren: a mixture with a draft model under Sequoia's or
// another rejection rule at temperature > 0), the mixture does not merge: a step's rows are the
// draft model's, or on a cheap step the confident cheap member's (a suffix match's counts), and the
// rule verifies the children against the distribution they were drawn from, which keeps it
// lossless. The cheap members still expand beside the draft model, to keep learning when they
// may stand in. Merging distributions instead (the members' softmaxes weighted by their calibrated
// hit rates) was tried: at T = 0.8 the suffix member's mass diluted the draft model's on new text,
// tau 3.2-4.9 against the draft model's 5.6-6.9. A mixture of guessers only (ngram, suffix) is
// deterministic: greedy and target-sample verification, lossless for any tree. Members that read
// the target's features are refused (a feature drafter needs every step's features).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "speculate/draft_outlook.h"
#include "speculate/drafter.h"
#include "speculate/mixture_chain_learning.h"
#include "speculate/mixture_member.h"
#include "speculate/mixture_member_choice.h"
#include "speculate/mixture_ranking.h"
#include "speculate/node_attribution.h"

namespace grove {

class DrafterMixture : public Drafter, public NodeAttribution, public StepOutlook {
 public:
  // The figures its parts learn and decide by (their files say why).
  static constexpr int64_t kMinEvidence = MemberChoice::kMinEvidence;
  static constexpr int64_t kRecordSteps = MemberChoice::kRecordSteps;
  static constexpr int32_t kLongMatch = MemberChoice::kLongMatch;
  static constexpr int32_t kChainDepths = ChainLearning::kChainDepths;
  static constexpr double kChainPrior = ChainLearning::kChainPrior;
  static constexpr double kTailPrior = ChainLearning::kTailPrior;
  // Members are bits of a node's mask (NodeAttribution).
  static constexpr std::size_t kMaxMembers = 32;

  // Throws grove::Error on fewer than two members or more than kMaxMembers, members of different
  // vocabularies, or one that reads the target's features.
  explicit DrafterMixture(std::vector<std::unique_ptr<Drafter>> members);

  std::string_view name() const override { return name_; }
  int32_t n_vocab() const override { return n_vocab_; }
  // Deterministic unless a member samples (a draft model).
  bool deterministic() const override { return deterministic_; }
  void SampleChildren(bool sampled) override;
  void ReuseCache(bool reuse) override;
  void Begin(std::span<const int32_t> context) override;
  std::span<const float> Expand(const TokenTree& tree, std::span<const int32_t> frontier) override;
  void Commit(const TokenTree& tree, std::span<const int32_t> accepted,
              int32_t next_token) override;
  void End() override;
  void Reserve(int32_t max_frontier, int32_t max_tree_nodes) override;
  bool HasRoomFor(int32_t fed_nodes) const override;

  DraftOutlook Prepare() override;
  void Decline() override;
  void DraftTail(int32_t planned_nodes) override { tail_from_ = planned_nodes; }

  std::span<const std::string> sources() const override { return source_names_; }
  void NodeSources(const TokenTree& tree, std::vector<uint32_t>& masks) const override;
  std::string Why() const override;

  std::vector<MixtureMemberStats> member_stats() const;

 private:
  // At a step's start: the cheap members expand the root, and which members take part is decided
  // (MemberChoice); the others expand it at the root's Expand. `priceable`: the step planner
  // prices a cheap step offered (Prepare), so the dear steps' record may decide.
  void DecideMembers(bool priceable);
  void ExpandMember(MixtureMember& m, const TokenTree& tree, std::span<const int32_t> frontier);
  // The root's rows: of the members that did not expand it deciding the step.
  void ExpandRoot(const TokenTree& tree, std::span<const int32_t> frontier);
  // Whether m's first choice at every node of the path from the root to `node` (its last) was
  // that node's token.
  bool FollowedPath(const MixtureMember& m, const TokenTree& tree, int32_t node) const;
  // The rows below a tail's planned depth: the cheap members' confident guesses.
  std::span<const float> ExpandTail(const TokenTree& tree, std::span<const int32_t> frontier);
  // The rows this call returns: the merged ones, or with sampled children the rows of the member
  // they are drawn from.
  std::span<const float> Rows(const TokenTree& tree, std::span<const int32_t> frontier);
  // The members merged in this call: active, and expanded it.
  uint32_t Merged() const;
  // What a decided step teaches the chains' records and the dear steps' record.
  void LearnStep(const TokenTree& tree, std::span<const int32_t> accepted, int32_t next_token);

  std::vector<MixtureMember> members_;
  std::vector<std::string> source_names_;
  std::string name_;
  int32_t n_vocab_;
  bool deterministic_ = true;  // every member is
  bool sampled_ = false;       // children are sampled from the rows (SampleChildren)
  CandidateRanking ranking_;
  MemberChoice choice_;
  ChainLearning chains_;
  double step_draft_seconds_ = 0.0;  // the members' Expand calls this step
  uint32_t expanded_ = 0;            // the members that expanded the rows of this Expand call
  int32_t tail_from_ = 0;  // this step's planned chain's depth when a tail follows it (DraftTail)
  TokenTree root_only_;    // the tree of a step's first Expand
};

}  // namespace grove
