// How a drafter mixture (speculate/drafter_mixture.h) ranks its members' candidates in one row:
// every step, each member that takes part proposes rows for the same frontier, and the merged row
// ranks their tokens so one tree holds the candidates of all of them: a draft model's guesses
// where the text is new, the suffix drafter's where it repeats something seen. How much a member's
// word is worth is learnt online: w_i(share) is how often the member's first choice was the token
// the target then accepted (or emitted), over the nodes of accepted paths it expanded, kept apart
// by the share its row gave that choice (kShareBuckets bands; a suffix match seen once says 1 and
// is right far less often than a draft model that says 0.9), and learnt again over the rows where
// the members' first choices differed, which is what ranks a row they dispute. A candidate t of
// member i scores w_i(share_i) * p_i(t) / p_i(first_i), and the members' scores combine as the
// chance that one of them is right, 1 - prod_i (1 - score_i(t)). Running means at first, then
// moving averages over about kWeightMemory choices. Only each member's kCandidates best tokens of a
// row are ranked.
//
// The ranking also remembers which members proposed each candidate, by the path of the node it
// would follow (a hash of the tokens from the root), so that the nodes of a step's tree, or of a
// selection of it (OPT-Tree), are attributed to their members (NodeAttribution).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "speculate/mixture_member.h"
#include "speculate/token_tree.h"

namespace grove {

class CandidateRanking {
 public:
  // Tokens each member puts forward per row: the merged row ranks their union (trees wider than
  // this per node see at most this many of each member's).
  static constexpr std::size_t kCandidates = 8;

  CandidateRanking() = default;
  CandidateRanking(std::size_t n_members, int32_t n_vocab);

  // Grows what a call and a step keep to frontiers of max_frontier nodes and trees of
  // max_tree_nodes, so that steps do not allocate.
  void Reserve(int32_t max_frontier, int32_t max_tree_nodes);
  // A step starts: the last one's proposals are forgotten.
  void StartStep() { proposals_.clear(); }

  // Of member i's rows for `frontier` (this call's): each row's best tokens, largest logit and
  // softmax normaliser, and the member's first choice and its share at each frontier node.
  void Summarize(std::size_t i, std::span<const float> rows, std::span<const int32_t> frontier,
                 MixtureMember& member);
  // Whether member i's row r of this call is confident (its first choice takes at least
  // kConfidentShare of it).
  bool Confident(std::size_t i, std::size_t r) const;
  // Member i's rows of its last Summarize.
  std::span<const float> member_rows(std::size_t i) const { return member_rows_[i]; }

  // The path hashes of the frontier's nodes (their parents' are known: expanded before them).
  void TracePaths(const TokenTree& tree, std::span<const int32_t> frontier);
  // The merged rows for `frontier` of the members in `merged` (bit i: member i, active and
  // expanded in this call), recorded as this step's proposals; with `confident_only` a row where
  // none of them is confident proposes nothing. Valid until the next Merge.
  std::span<const float> Merge(std::span<const MixtureMember> members, uint32_t merged,
                               std::span<const int32_t> frontier, bool confident_only);
  // With sampled children: whatever the builder draws from member's rows for `frontier` comes
  // from that member.
  void RecordRowMember(std::span<const int32_t> frontier, std::size_t member);

  // The members that proposed node `node` of the step's drafted tree.
  uint32_t ProposedBy(const TokenTree& tree, int32_t node) const;
  // The same for each node of `tree`, which may be a selection of the drafted tree: by path.
  void NodeSources(const TokenTree& tree, std::vector<uint32_t>& masks) const;
  // Counts the nodes each member proposed, and those of them the target accepted.
  void CountNodes(std::span<MixtureMember> members, const TokenTree& tree,
                  std::span<const int32_t> accepted) const;

 private:
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
  // A merged row's candidate: the path of the node it would follow, its token, and the members
  // whose rows proposed it. With sampled children, one per row with token kAnyToken: whatever the
  // builder draws from that row comes from `members`.
  static constexpr int32_t kAnyToken = -2;
  struct Proposal {
    uint64_t parent_path = 0;
    int32_t token = -1;
    uint32_t members = 0;
  };

  RowSummary SummarizeRow(std::span<const float> row);
  // Adds the row's best tokens to candidates_ (once each).
  void AddCandidates(const RowSummary& summary);
  // Row r's candidates scored into `out` and recorded as proposals.
  void ScoreCandidates(std::span<const MixtureMember> members, uint32_t merged, std::size_t r,
                       std::size_t slot, float* out);

  int32_t n_vocab_ = 0;
  std::vector<std::span<const float>> member_rows_;  // by member, this call's
  std::vector<std::vector<RowSummary>> summaries_;   // by member and row, this call's
  std::vector<int32_t> candidates_;                  // one merged row's tokens
  std::vector<int32_t> best_;                        // SummarizeRow's scratch
  std::vector<float> rows_;                          // the merged rows
  // This step's (until the next StartStep): every merged candidate, and each drafted node's path
  // hash and its row's candidates in proposals_ (by node + 1; 0: the root).
  std::vector<Proposal> proposals_;
  std::vector<uint64_t> path_of_;
  std::vector<std::pair<int32_t, int32_t>> row_of_;
};

// Whether the active members that proposed something for the node at `slot` (its frontier index
// + 1) this step proposed different first choices.
bool Disputed(std::span<const MixtureMember> members, std::size_t slot);

// Updates the active members' hit rates (weight, by share, when disputed, when confident at the
// root) from this step's accepted path: the root, then each accepted node, and the token that
// followed each.
void LearnFirstChoices(std::span<MixtureMember> members, const TokenTree& tree,
                       std::span<const int32_t> accepted, int32_t next_token);

}  // namespace grove
