// Several drafters as one (issue 32's controller, first part): every step, each member that takes
// part proposes rows for the same frontier and the mixture ranks each row's tokens by
//
// so one tree holds the candidates of all of them: a draft model's guesses where the text is new,
// the suffix drafter's where it repeats something seen. How much a member's word is worth is learnt
// online: w_i(share) is how often the member's first choice was the token the target then accepted
// (or emitted), over the nodes of accepted paths it expanded, kept apart by the share its row gave
// that choice (kShareBuckets bands; a suffix match seen once says 1 and is right far less often
// than a draft model that says 0.9), and learnt again over the rows where the members' first
// choices differed, which is what ranks a row they dispute. A candidate t of member i scores
// w_i(share_i) * p_i(t) / p_i(first_i), and the members' scores combine as the chance that one of
// them is right, 1 - prod_i (1 - score_i(t)). Running means at first, then moving averages over
// about kWeightMemory choices. Only each member's kCandidates best tokens of a row are ranked.
//
// Members differ in cost by orders of magnitude (a draft model's forward against a suffix lookup in
// microseconds), so each step the controller first asks the cheap members for the root's row and
// may skip the expensive ones for the whole step when a cheap member could stand in there: one
// confident (its first choice takes at least kConfidentShare of its row) and proven (judged on
// kMinEvidence such rows), or, none being confident, one unsure of the first choice it proposes.
// Which way is faster is priced, not guessed from hit rates alone: the steps the dear members
// drafted where a cheap member could have stood in are recorded, apart for an unsure root, a
// confident one and a confident one that followed a long match, i.e. copying a passage (the
// tokens they gave, the nodes verified, the seconds drafting), and once
// kMinEvidence of a class are, its steps are offered as cheap ones with that record beside them,
// and the session drafts the cheap members' chain only where it is predicted faster than both a
// plain step and the record (speculate/draft_outlook.h). On Game of 24 prompts the suffix drafter,
// confident at the root and right there 63-70% of the time against the draft model's 72-74%, lost
// every such step to it by the hit rates alone, where its chains of 5 gave 3.3 tokens a step in
// 2.5-2.9 ms and the draft model's steps 2.9 tokens in 2.8-3.1 ms. Before the record of confident
// roots holds kMinEvidence steps (and wherever no session prices the offer), the hit rates decide:
// a confident, proven cheap member stands in when it has been right at least as often when
// confident as the expensive member has been right at all; an unsure one never does. A skipped
// member expands nothing this step and catches up on the accepted tokens at Commit (Drafter's
// contract allows a step whose tree it did not expand).
//
// Before a step's tree is chosen it says whether the step will be a cheap one (StepOutlook): the
// session may then draft a chain of the depth the cheap members' record on such steps is worth
// (speculate/draft_outlook.h), or decline, and every member drafts the planned tree. That record,
// the chance that the chain's node at each depth is accepted when its parent was, is learnt on
// every step of the class: on a cheap one from its chain, on a dear one from the stand-in's first
// choices along the path the target took, as far as the stand-in expanded it (the target's tokens
// are the same whatever was drafted). Learnt on cheap steps alone, the rates stayed at their prior
// wherever the dear way won, and a chain that would have won was never tried: on repeated requests
// the suffix member's chains of 14 nodes, once tried, gave 15 tokens a step at 4.3 a millisecond,
// where the draft model's trees of 11 had given 7.2 at 1.8 and those with a tail 13.6 at 3.4
// (one server each; paired over 5 rounds, the class served 1.09x as fast). On the other
// steps it says what a tail past a planned chain has been worth, and drafts one when asked: below
// the planned depth only the cheap members whose first choices were the path's tokens from the
// root on expand, and a row proposes their guesses only where one of them is confident (an empty
// row ends the chain).
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

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "speculate/call_cost.h"
#include "speculate/draft_outlook.h"
#include "speculate/drafter.h"
#include "speculate/node_attribution.h"

namespace grove {

// What the controller saw of one member, for reports.
struct MixtureMemberStats {
  std::string name;
  double weight = 0.0;          // its current weight
  int64_t steps = 0;            // steps it took part in
  int64_t skipped = 0;          // steps it was skipped in
  int64_t first_choices = 0;    // path nodes it expanded
  int64_t right = 0;            // ... where its first choice was the token that followed
  int64_t nodes = 0;            // tree nodes it proposed (with others or alone)
  int64_t accepted_nodes = 0;   // ... that the target accepted
  double expand_seconds = 0.0;  // in its Expand calls
};

class DrafterMixture : public Drafter, public NodeAttribution, public StepOutlook {
 public:
  static constexpr double kWeightMemory = 32.0;  // steps the moving averages remember
  static constexpr double kMinWeight = 0.05;
  // Confident root rows a cheap member must have been judged on before it may stand in for a dear
  // one.
  static constexpr int64_t kMinEvidence = 8;
  // A class's record of dear steps is started over after this many cheap steps of the class in a
  // row: while the cheap way wins nothing updates the record, and what the dear steps give changes
  // with the planned tree (the server's table rechooses it as it learns) and with the text. On Game
  // of 24 prompts a record taken on the server's start trees of 11 nodes (2.9 tokens a step, 0.63
  // tokens a millisecond) kept the suffix member's chains (1.1 a millisecond) for the whole class,
  // where the draft model's chains of 4-5 and their tails, the table's after its first update,
  // gave 1.26 in one run and 1.6 in another.
  static constexpr int64_t kRecordSteps = 128;
  static constexpr int kShareBuckets = 5;
  static int Bucket(float share) {
    return std::clamp(static_cast<int>(share * kShareBuckets), 0, kShareBuckets - 1);
  }
  static constexpr float kConfidentShare = 0.5f;
  // A cheap member's root row follows a long match (RootClass) from this many tokens on: half of
  // what the suffix drafter's index holds (SuffixStore's max_depth, 16).
  static constexpr int32_t kLongMatch = 8;
  // A member costs "little" when its Expand takes under this share of the dearest member's.
  static constexpr double kCheapShare = 0.1;
  // Tokens each member puts forward per row: the merged row ranks their union (trees wider than
  // this per node see at most this many of each member's).
  static constexpr std::size_t kCandidates = 8;
  // Depths whose continue rates cheap steps learn (deeper ones take the last), the rates assumed
  // before any evidence (as kChainPriorWeight chains), and their memory in cheap steps.
  static constexpr int32_t kChainDepths = 32;
  static constexpr double kChainPrior = 0.8;
  static constexpr double kChainPriorWeight = 2.0;
  static constexpr double kChainHalfLifeSteps = 64.0;
  // Tails: the chance a tail node is accepted when its parent was (the first one: when proposed),
  // assumed before any evidence (as kTailPriorWeight nodes), and the memory in steps. Every step
  // fades the evidence, tail or not, so a tail that stopped paying is tried again after some
  // hundred steps: the text may repeat by then. The chance that the k-th node is accepted is the
  // product of the first k; learnt directly by place, places that tails seldom reached kept the
  // prior's 0.5 and priced the 20th tail node as high as the first (on Game of 24 prompts tails of
  // 18-19 nodes gave 0.55 tokens a millisecond where those of 6-8 gave 1.5).
  static constexpr double kTailPrior = 0.5;
  static constexpr double kTailPriorWeight = 2.0;
  static constexpr double kTailHalfLifeSteps = 128.0;

  // Throws grove::Error on fewer than two members, members of different vocabularies, or one that
  // reads the target's features.
  explicit DrafterMixture(std::vector<std::unique_ptr<Drafter>> members);

  std::string_view name() const override { return name_; }
  int32_t n_vocab() const override { return n_vocab_; }
  // Deterministic unless a member samples (a draft model).
  bool deterministic() const override { return deterministic_; }
  void SampleChildren(bool sampled) override;
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
  struct Member {
    std::unique_ptr<Drafter> drafter;
    double weight = 0.5;  // first-choice hit rate, moving average
    // How often its first choice was right when its row gave that choice a share in each
    // kShareBuckets-th of [0, 1] (starting from the bucket's middle: as if calibrated).
    std::array<double, kShareBuckets> bucket_hit{};
    std::array<int64_t, kShareBuckets> bucket_seen{};
    // Its chance of being right about its first choice when the row gives it `share`.
    double Calibrated(float share) const { return bucket_hit[Bucket(share)]; }
    // The same over the rows where the active members' first choices differed, which is what
    // ranks one member's guess against another's: rows where they agree are the predictable ones
    // and flatter a member that only repeats the text (a suffix match, sure of a template's words
    // and of another problem's numbers alike).
    std::array<double, kShareBuckets> disputed_hit{};
    std::array<int64_t, kShareBuckets> disputed_seen{};
    double CalibratedWhenDisputed(float share) const { return disputed_hit[Bucket(share)]; }
    double confident_hit = 0.5;   // the same over confident root rows only
    int64_t confident_seen = 0;   // confident root rows judged
    CallCost call_cost;           // of one Expand call
    bool active = false;          // takes part in this step
    bool cheap = false;           // costs little next to the dearest (this step's view)
    bool root_done = false;       // expanded the root this step
    bool confident_root = false;  // its root row this step was confident
    // Its root row this step followed a match of at least kLongMatch tokens (a lookup's,
    // Drafter::matched_lengths).
    bool long_match_root = false;
    // By frontier node this step (node + 1; 0: the root): -1 where it proposes nothing there,
    // kNotExpanded where it did not expand the node.
    std::vector<int32_t> first_choice;
    std::vector<float> first_share;  // the share its row gave that choice
    MixtureMemberStats stats;
  };

  // A merged row's candidate: the path of the node it would follow (a hash of the tokens from the
  // root), its token, and the members whose rows proposed it. With sampled children, one per row
  // with token kAnyToken: whatever the builder draws from that row comes from `members`.
  static constexpr int32_t kAnyToken = -2;
  struct Proposal {
    uint64_t parent_path = 0;
    int32_t token = -1;
    uint32_t members = 0;
  };
  // Why a step's members took part (ChooseMembers), kept as figures and told by Why().
  struct StepReason {
    enum class Kind {
      kUntimed,
      kNoneConfident,
      kUnproven,
      kOutweighed,
      kSkipped,
      kDeclined,
      kBranching,
      kPriced,         // offered as a cheap step against the dear steps' record
      kPricedDeclined  // ... and the session found no chain faster
    };
    Kind kind = Kind::kUntimed;
    int cheap = -1;  // the confident cheap member
    int dear = -1;   // the member it stood in for, or did not
    float share = 0.0f;
    double hit = 0.0;
    double dear_weight = 0.0;
    int64_t seen = 0;
    double dear_tokens = 0.0, dear_nodes = 0.0, dear_seconds = 0.0;  // kPriced: the record
    bool long_match = false;  // the cheap member's root row followed a long match
  };
  // Moving averages of what the dear members' steps gave where a cheap member could have stood in
  // (one record per RootClass; the class comment): running means over the first kWeightMemory
  // steps.
  struct DearRecord {
    double tokens = 0.0;  // accepted nodes + 1
    double nodes = 0.0;   // verified (the planned tree and any tail)
    double draft_seconds = 0.0;
    int64_t seen = 0;
    void Add(double step_tokens, double step_nodes, double step_draft_seconds);
  };

  // Of one member row: its kCandidates best tokens (fewer where it proposes fewer; the first is
  // its first choice), its largest logit and the sum of exp(logit - max) (the softmax's
  // normaliser).
  struct RowSummary {
    int32_t first = -1;  // -1: it proposes nothing
    float max = 0.0f;
    float sum = 0.0f;
    int32_t n_best = 0;
    std::array<int32_t, kCandidates> best{};
  };
  RowSummary Summarize(std::span<const float> row);
  // Whether the active members that proposed something for the node at `slot` (its frontier
  // index + 1) this step proposed different first choices.
  bool Disputed(std::size_t slot) const;
  // Adds the row's best tokens to candidates_ (once each).
  void AddCandidates(const RowSummary& summary);
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

  // Expands every active member's rows for `frontier`, timing each.
  void ExpandMembers(const TokenTree& tree, std::span<const int32_t> frontier);
  // Whether m's first choice at every node of the path from the root to `node` (its last) was
  // that node's token.
  bool FollowedPath(const Member& m, const TokenTree& tree, int32_t node) const;
  // The rows below a tail's planned depth: the cheap members' confident guesses.
  std::span<const float> ExpandTail(const TokenTree& tree, std::span<const int32_t> frontier);
  // At a step's start: the cheap members expand the root, and which members take part is decided
  // (see the file comment); the others expand it at the root's Expand. `priceable`: the session
  // prices a cheap step offered (Prepare), so the dear steps' record may decide.
  void DecideMembers(bool priceable);
  // Every member takes part this step after all (a declined chain; or sampled children on a
  // planned tree, where no cheap member stands in); a skip's reason becomes `instead_of_skipping`.
  void TakeEveryMember(StepReason::Kind instead_of_skipping);
  // Learns the continue rates of a cheap step's tree, and a tail's acceptance.
  void LearnChain(const TokenTree& tree, std::span<const int32_t> accepted);
  // ... and, on a dear step, those of the chain the stand-in would have drafted.
  void LearnStandInChain(const TokenTree& tree, std::span<const int32_t> accepted,
                         int32_t next_token);
  void LearnTail(const TokenTree& tree, std::span<const int32_t> accepted);
  void ExpandMember(Member& m, const TokenTree& tree, std::span<const int32_t> frontier);
  // The merged rows of the members that expanded `frontier` in this call; with `confident_only`
  // a row where none of them is confident proposes nothing.
  void Merge(std::span<const int32_t> frontier, bool confident_only);
  // With sampled children: the member whose rows this step's children are drawn from (the
  // sampling member when it takes part, else the cheap member standing in for it), its rows
  // recorded as the proposals.
  std::size_t RowMember() const;
  void RecordRowMember(std::span<const int32_t> frontier, std::size_t member);
  // The path hashes of the frontier's nodes (their parents' are known: expanded before them).
  void TracePaths(const TokenTree& tree, std::span<const int32_t> frontier);
  // The members that proposed node `node` of the step's drafted tree.
  uint32_t ProposedBy(const TokenTree& tree, int32_t node) const;
  // Counts the nodes each member proposed, and those of them the target accepted.
  void CountNodes(const TokenTree& tree, std::span<const int32_t> accepted);
  // Why() without the tail.
  std::string StepWhy() const;
  // Updates the weights from this step's accepted path.
  void Learn(const TokenTree& tree, std::span<const int32_t> accepted, int32_t next_token);

  std::vector<Member> members_;
  std::vector<std::string> source_names_;
  std::string name_;
  int32_t n_vocab_;
  bool deterministic_ = true;  // every member is
  bool sampled_ = false;       // children are sampled from the rows (SampleChildren)
  std::vector<std::span<const float>> member_rows_;  // by member, this call's
  std::vector<std::vector<RowSummary>> summaries_;   // by member and row, this call's
  std::vector<int32_t> candidates_;                  // one merged row's tokens
  std::vector<int32_t> best_;                        // Summarize's scratch
  std::vector<float> rows_;                          // the merged rows
  // This step's (until the next root Expand): every merged candidate, each drafted node's path
  // hash and its row's candidates in proposals_ (by node + 1; 0: the root), and the reason.
  std::vector<Proposal> proposals_;
  std::vector<uint64_t> path_of_;
  std::vector<std::pair<int32_t, int32_t>> row_of_;
  StepReason reason_;
  bool decided_ = false;  // this step's members are decided (Prepare, or the root's Expand)
  double step_draft_seconds_ = 0.0;  // the members' Expand calls this step
  uint32_t expanded_ = 0;            // the members that expanded the rows of this Expand call
  int32_t tail_from_ = 0;  // this step's planned chain's depth when a tail follows it (DraftTail)
  TokenTree root_only_;    // the tree of a step's first Expand
  // Cheap steps, and the dear steps they are priced against, kept apart by how sure the cheap
  // member that would stand in was at the root: kConfidentRoot (and proven), or kUnsureRoot (its
  // first choice there took under kConfidentShare of its row; offered only once priced). A chain
  // that follows an unsure first guess is accepted less often at its first node, and the draft
  // model's steps there have less to gain from the cheap members' candidates. A confident root
  // is kLongMatchRoot instead when the member's row followed a match of kLongMatch tokens or
  // more: it is copying a passage (a request served before, a story retold), where a chain goes
  // on for many nodes; after a short match (a problem's template words around new numbers, a
  // Game of 24 step line) it is confident as often but right for a node or two. One record
  // priced both: on word problems in a mixed workload the chains taken there gave 0.5-0.8
  // tokens a millisecond where the draft model's steps gave 1.1.
  static constexpr int32_t kNotExpanded = -2;  // Member::first_choice
  static constexpr int kConfidentRoot = 0;
  static constexpr int kUnsureRoot = 1;
  static constexpr int kLongMatchRoot = 2;
  // Either class a proven confident member stands in from (not kUnsureRoot, not -1).
  static bool ConfidentClass(int root_class) {
    return root_class == kConfidentRoot || root_class == kLongMatchRoot;
  }
  struct RootClass {
    // By depth, the chance a chain's node is accepted when its parent was.
    FadedRates chain_rates{kChainDepths, kChainPrior, kChainPriorWeight, kChainHalfLifeSteps};
    DearRecord dear;
    int64_t cheap_in_a_row = 0;  // cheap steps since the last dear one
  };
  std::array<RootClass, 3> by_root_;
  int root_class_ = -1;  // this step's; -1: no cheap member may stand in
  int stand_in_ = -1;    // this step's cheap member that would stand in (DecideMembers), or -1
  // Tails: by place in the tail, the chance a node is accepted when its parent was; and their
  // products, the chance it is accepted (Prepare's).
  FadedRates tail_rates_;
  std::vector<double> tail_reach_;
};

}  // namespace grove
