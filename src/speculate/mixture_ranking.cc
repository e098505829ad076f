#include "speculate/mixture_ranking.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/activation.h"
#include "sample/sampler.h"

namespace grove {
namespace {

constexpr float kNone = -std::numeric_limits<float>::infinity();

// The path hash of a node whose parent's path hashes to `parent` (the root's is kRootPath).
constexpr uint64_t kRootPath = 0x9e3779b97f4a7c15ull;
uint64_t ChildPath(uint64_t parent, int32_t token) {
  uint64_t x = parent ^ (static_cast<uint64_t>(static_cast<uint32_t>(token)) + kRootPath +
                         (parent << 6) + (parent >> 2));
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  return x ^ (x >> 29);
}

}  // namespace

CandidateRanking::CandidateRanking(std::size_t n_members, int32_t n_vocab)
    : n_vocab_(n_vocab), member_rows_(n_members), summaries_(n_members) {}

void CandidateRanking::Reserve(int32_t max_frontier, int32_t max_tree_nodes) {
  const std::size_t n_members = summaries_.size();
  rows_.reserve(static_cast<std::size_t>(max_frontier) * n_vocab_);
  for (auto& s : summaries_) s.reserve(static_cast<std::size_t>(max_frontier));
  candidates_.reserve(n_members * kCandidates);
  best_.reserve(kCandidates + 1);
  const std::size_t slots = static_cast<std::size_t>(max_tree_nodes) + 1;
  proposals_.reserve(slots * n_members * kCandidates);
  path_of_.resize(std::max(path_of_.size(), slots), 0);
  row_of_.resize(std::max(row_of_.size(), slots), {0, 0});
}

CandidateRanking::RowSummary CandidateRanking::SummarizeRow(std::span<const float> row) {
  // The SIMD scans of the sampler's top-k and softmax: a draft model's row is the whole
  // vocabulary, for every row of every level.
  TopTokens(row, static_cast<int32_t>(kCandidates), kNone, best_);
  RowSummary summary;
  if (best_.empty()) return summary;
  summary.first = best_[0];
  summary.max = row[static_cast<std::size_t>(summary.first)];
  summary.sum = SumExp(row.data(), static_cast<int64_t>(row.size()), summary.max);
  summary.n_best = static_cast<int32_t>(best_.size());
  std::copy(best_.begin(), best_.end(), summary.best.begin());
  return summary;
}

void CandidateRanking::Summarize(std::size_t i, std::span<const float> rows,
                                 std::span<const int32_t> frontier, MixtureMember& m) {
  member_rows_[i] = rows;
  const std::size_t nv = static_cast<std::size_t>(n_vocab_);
  summaries_[i].resize(frontier.size());
  for (std::size_t r = 0; r < frontier.size(); ++r) {
    const RowSummary summary = SummarizeRow(rows.subspan(r * nv, nv));
    summaries_[i][r] = summary;
    const std::size_t slot = static_cast<std::size_t>(frontier[r]) + 1;
    if (m.first_choice.size() <= slot) {
      m.first_choice.resize(slot + 1, MixtureMember::kNotExpanded);
      m.first_share.resize(slot + 1, 0.0f);
    }
    m.first_choice[slot] = summary.first;
    if (summary.first >= 0) m.first_share[slot] = 1.0f / summary.sum;
  }
}

bool CandidateRanking::Confident(std::size_t i, std::size_t r) const {
  const RowSummary& s = summaries_[i][r];
  return s.first >= 0 && 1.0f / s.sum >= MixtureMember::kConfidentShare;
}

void CandidateRanking::AddCandidates(const RowSummary& summary) {
  for (int32_t i = 0; i < summary.n_best; ++i) {
    const int32_t t = summary.best[static_cast<std::size_t>(i)];
    if (std::find(candidates_.begin(), candidates_.end(), t) == candidates_.end())
      candidates_.push_back(t);
  }
}

void CandidateRanking::TracePaths(const TokenTree& tree, std::span<const int32_t> frontier) {
  for (int32_t f : frontier) {
    const std::size_t slot = static_cast<std::size_t>(f) + 1;
    if (path_of_.size() <= slot) {
      path_of_.resize(slot + 1, 0);
      row_of_.resize(slot + 1, {0, 0});
    }
    if (f < 0) {
      path_of_[slot] = kRootPath;
    } else {
      const TreeNode& node = tree.node(f);
      path_of_[slot] = ChildPath(path_of_[static_cast<std::size_t>(node.parent) + 1], node.token);
    }
  }
}

std::span<const float> CandidateRanking::Merge(std::span<const MixtureMember> members,
                                               uint32_t merged, std::span<const int32_t> frontier,
                                               bool confident_only) {
  const std::size_t nv = static_cast<std::size_t>(n_vocab_);
  rows_.assign(frontier.size() * nv, kNone);
  for (std::size_t r = 0; r < frontier.size(); ++r) {
    candidates_.clear();
    bool confident = !confident_only;
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (!(merged >> i & 1u)) continue;
      AddCandidates(summaries_[i][r]);
      confident = confident || Confident(i, r);
    }
    if (!confident) candidates_.clear();
    const std::size_t slot = static_cast<std::size_t>(frontier[r]) + 1;
    row_of_[slot].first = static_cast<int32_t>(proposals_.size());
    ScoreCandidates(members, merged, r, slot, rows_.data() + r * nv);
    row_of_[slot].second = static_cast<int32_t>(proposals_.size());
  }
  return rows_;
}

void CandidateRanking::ScoreCandidates(std::span<const MixtureMember> members, uint32_t merged,
                                       std::size_t r, std::size_t slot, float* out) {
  // Each candidate's chance that one of the members is right about it (the file comment);
  // ranking is all the builder reads of a deterministic drafter's row.
  const std::size_t nv = static_cast<std::size_t>(n_vocab_);
  const bool disputed = Disputed(members, slot);
  for (int32_t t : candidates_) {
    double all_wrong = 1.0;
    uint32_t proposed_by = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (!(merged >> i & 1u)) continue;
      const RowSummary& s = summaries_[i][r];
      const float logit = member_rows_[i][r * nv + t];
      if (s.first < 0 || logit == kNone) continue;
      proposed_by |= 1u << i;
      const float share = 1.0f / s.sum;
      const double hit =
          disputed ? members[i].CalibratedWhenDisputed(share) : members[i].Calibrated(share);
      const double right = hit * std::exp(static_cast<double>(logit - s.max));
      all_wrong *= 1.0 - std::clamp(right, 0.0, 1.0 - 1e-6);
    }
    out[t] = static_cast<float>(std::log(1.0 - all_wrong));
    proposals_.push_back({.parent_path = path_of_[slot], .token = t, .members = proposed_by});
  }
}

void CandidateRanking::RecordRowMember(std::span<const int32_t> frontier, std::size_t member) {
  for (int32_t f : frontier) {
    const std::size_t slot = static_cast<std::size_t>(f) + 1;
    row_of_[slot].first = static_cast<int32_t>(proposals_.size());
    proposals_.push_back(
        {.parent_path = path_of_[slot], .token = kAnyToken, .members = 1u << member});
    row_of_[slot].second = static_cast<int32_t>(proposals_.size());
  }
}

uint32_t CandidateRanking::ProposedBy(const TokenTree& tree, int32_t node) const {
  const TreeNode& n = tree.node(node);
  const std::size_t slot = static_cast<std::size_t>(n.parent) + 1;
  if (slot >= row_of_.size()) return 0;
  for (int32_t p = row_of_[slot].first; p < row_of_[slot].second; ++p) {
    const Proposal& proposal = proposals_[static_cast<std::size_t>(p)];
    if (proposal.token == n.token || proposal.token == kAnyToken) return proposal.members;
  }
  return 0;
}

void CandidateRanking::NodeSources(const TokenTree& tree, std::vector<uint32_t>& masks) const {
  // By path, not by index: the tree may be a selection of the drafted one (OPT-Tree).
  std::vector<uint64_t> path(static_cast<std::size_t>(tree.size()));
  masks.assign(path.size(), 0);
  for (int32_t i = 0; i < tree.size(); ++i) {
    const TreeNode& n = tree.node(i);
    const uint64_t parent = n.parent < 0 ? kRootPath : path[static_cast<std::size_t>(n.parent)];
    path[static_cast<std::size_t>(i)] = ChildPath(parent, n.token);
    for (const Proposal& p : proposals_) {
      if (p.parent_path == parent && (p.token == n.token || p.token == kAnyToken)) {
        masks[static_cast<std::size_t>(i)] = p.members;
        break;
      }
    }
  }
}

void CandidateRanking::CountNodes(std::span<MixtureMember> members, const TokenTree& tree,
                                  std::span<const int32_t> accepted) const {
  for (int32_t node = 0; node < tree.size(); ++node) {
    const uint32_t by = ProposedBy(tree, node);
    for (std::size_t i = 0; i < members.size(); ++i) members[i].stats.nodes += by >> i & 1u;
  }
  for (int32_t node : accepted) {
    const uint32_t by = ProposedBy(tree, node);
    for (std::size_t i = 0; i < members.size(); ++i) {
      members[i].stats.accepted_nodes += by >> i & 1u;
    }
  }
}

bool Disputed(std::span<const MixtureMember> members, std::size_t slot) {
  int32_t agreed = -1;
  for (const MixtureMember& m : members) {
    if (!m.active || m.FirstChoice(slot) < 0) continue;
    if (agreed >= 0 && m.first_choice[slot] != agreed) return true;
    agreed = m.first_choice[slot];
  }
  return false;
}

void LearnFirstChoices(std::span<MixtureMember> members, const TokenTree& tree,
                       std::span<const int32_t> accepted, int32_t next_token) {
  for (std::size_t j = 0; j <= accepted.size(); ++j) {
    const int32_t node = j == 0 ? -1 : accepted[j - 1];
    const std::size_t slot = static_cast<std::size_t>(node) + 1;
    const int32_t followed = j < accepted.size() ? tree.node(accepted[j]).token : next_token;
    const bool disputed = Disputed(members, slot);
    for (MixtureMember& m : members) {
      if (!m.active || m.FirstChoice(slot) < 0) continue;
      const bool right = m.first_choice[slot] == followed;
      ++m.stats.first_choices;
      m.stats.right += right;
      MixtureMember::Track(m.weight, right, static_cast<double>(m.stats.first_choices));
      const int band = MixtureMember::Bucket(m.first_share[slot]);
      MixtureMember::Track(m.bucket_hit[band], right,
                           static_cast<double>(++m.bucket_seen[band] + 1));
      if (disputed) {
        MixtureMember::Track(m.disputed_hit[band], right,
                             static_cast<double>(++m.disputed_seen[band] + 1));
      }
      if (node == -1 && m.confident_root) {
        MixtureMember::Track(m.confident_hit, right, static_cast<double>(++m.confident_seen));
      }
    }
  }
}

}  // namespace grove
