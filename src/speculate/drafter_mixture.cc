#include "speculate/drafter_mixture.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "base/timer.h"

namespace grove {

namespace {

constexpr float kNone = -std::numeric_limits<float>::infinity();

}  // namespace

DrafterMixture::RowSummary DrafterMixture::Summarize(std::span<const float> row) {
  const auto top = std::max_element(row.begin(), row.end());
  if (top == row.end() || *top == kNone) return {};
  double sum = 0.0;
  for (float v : row) {
    if (v != kNone) sum += std::exp(v - *top);
  }
  return {.first = static_cast<int32_t>(top - row.begin()),
          .max = *top,
          .sum = static_cast<float>(sum)};
}

void DrafterMixture::AddCandidates(std::span<const float> row, const RowSummary& summary) {
  if (summary.first < 0) return;
  // The row's kCandidates best tokens: a small sorted list, one pass over the row.
  best_.clear();
  for (int32_t t = 0; t < static_cast<int32_t>(row.size()); ++t) {
    if (row[t] == kNone) continue;
    if (best_.size() == kCandidates && row[t] <= row[best_.back()]) continue;
    if (best_.size() == kCandidates) best_.pop_back();
    auto at = std::upper_bound(best_.begin(), best_.end(), t,
                               [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    best_.insert(at, t);
  }
  for (int32_t t : best_) {
    if (std::find(candidates_.begin(), candidates_.end(), t) == candidates_.end())
      candidates_.push_back(t);
  }
}

DrafterMixture::DrafterMixture(std::vector<std::unique_ptr<Drafter>> members) {
  if (members.size() < 2) Fail("a drafter mixture needs at least two drafters");
  n_vocab_ = members[0]->n_vocab();
  for (auto& d : members) {
    if (d->n_vocab() != n_vocab_) {
      Fail("drafter mixture: '", d->name(), "' has ", d->n_vocab(), " tokens, '",
           members[0]->name(), "' ", n_vocab_);
    }
    if (d->reads_target_features()) {
      Fail("drafter mixture: '", d->name(),
           "' reads the target's features at every step and cannot be skipped; mix draft "
           "models, 'ngram' and 'suffix'");
    }
    if (!name_.empty()) name_ += "+";
    name_ += d->name();
    Member m;
    for (int b = 0; b < kShareBuckets; ++b) m.bucket_hit[b] = (b + 0.5) / kShareBuckets;
    m.stats.name = std::string(d->name());
    m.drafter = std::move(d);
    members_.push_back(std::move(m));
  }
  member_rows_.resize(members_.size());
  summaries_.resize(members_.size());
}

void DrafterMixture::Begin(std::span<const int32_t> context) {
  for (Member& m : members_) m.drafter->Begin(context);
}

void DrafterMixture::Reserve(int32_t max_frontier, int32_t max_tree_nodes) {
  for (Member& m : members_) {
    m.drafter->Reserve(max_frontier, max_tree_nodes);
    m.first_choice.resize(std::max<std::size_t>(m.first_choice.size(), max_tree_nodes + 1), -1);
    m.first_share.resize(m.first_choice.size(), 0.0f);
  }
  rows_.reserve(static_cast<std::size_t>(max_frontier) * n_vocab_);
  for (auto& s : summaries_) s.reserve(static_cast<std::size_t>(max_frontier));
  candidates_.reserve(members_.size() * kCandidates);
  best_.reserve(kCandidates + 1);
}

bool DrafterMixture::HasRoomFor(int32_t fed_nodes) const {
  return std::all_of(members_.begin(), members_.end(),
                     [&](const Member& m) { return m.drafter->HasRoomFor(fed_nodes); });
}

void DrafterMixture::ExpandMember(Member& m, const TokenTree& tree,
                                  std::span<const int32_t> frontier) {
  Timer timer;
  const std::span<const float> rows = m.drafter->Expand(tree, frontier);
  const double seconds = timer.Seconds();
  m.stats.expand_seconds += seconds;
  m.seconds_per_call = m.seconds_per_call == 0.0
                           ? seconds
                           : m.seconds_per_call + 0.1 * (seconds - m.seconds_per_call);
  const std::size_t i = static_cast<std::size_t>(&m - members_.data());
  member_rows_[i] = rows;
  const std::size_t nv = static_cast<std::size_t>(n_vocab_);
  summaries_[i].resize(frontier.size());
  for (std::size_t r = 0; r < frontier.size(); ++r) {
    const RowSummary summary = Summarize(rows.subspan(r * nv, nv));
    summaries_[i][r] = summary;
    const std::size_t slot = static_cast<std::size_t>(frontier[r] + 1);
    if (m.first_choice.size() <= slot) {
      m.first_choice.resize(slot + 1, -1);
      m.first_share.resize(slot + 1, 0.0f);
    }
    m.first_choice[slot] = summary.first;
    if (summary.first >= 0) m.first_share[slot] = 1.0f / summary.sum;
    if (frontier[r] < 0)
      m.confident_root = summary.first >= 0 && 1.0f / summary.sum >= kConfidentShare;
  }
}

void DrafterMixture::ChooseMembers(const TokenTree& tree, std::span<const int32_t> frontier) {
  double dearest = 0.0;
  bool all_timed = true;
  // first_choice and confident_root were cleared by the last Commit (or never set).
  for (Member& m : members_) {
    m.active = true;
    dearest = std::max(dearest, m.seconds_per_call);
    all_timed = all_timed && m.seconds_per_call > 0.0;
  }
  const auto cheap = [&](const Member& m) {
    return all_timed && m.seconds_per_call < kCheapShare * dearest;
  };
  for (Member& m : members_) {
    if (cheap(m)) ExpandMember(m, tree, frontier);
  }
  for (Member& m : members_) {
    if (cheap(m)) continue;
    const bool covered = std::any_of(members_.begin(), members_.end(), [&](const Member& c) {
      return cheap(c) && c.confident_root && c.confident_seen >= kMinEvidence &&
             c.confident_hit >= m.weight;
    });
    if (covered) {
      m.active = false;
      ++m.stats.skipped;
    } else {
      ExpandMember(m, tree, frontier);
    }
  }
  for (Member& m : members_) m.stats.steps += m.active;
}

void DrafterMixture::ExpandMembers(const TokenTree& tree, std::span<const int32_t> frontier) {
  for (Member& m : members_) {
    if (m.active) ExpandMember(m, tree, frontier);
  }
}

void DrafterMixture::Merge(std::size_t n_rows) {
  const std::size_t nv = static_cast<std::size_t>(n_vocab_);
  rows_.assign(n_rows * nv, kNone);
  for (std::size_t r = 0; r < n_rows; ++r) {
    candidates_.clear();
    for (std::size_t i = 0; i < members_.size(); ++i) {
      if (members_[i].active) AddCandidates(member_rows_[i].subspan(r * nv, nv), summaries_[i][r]);
    }
    // Each candidate's chance that one of the members is right about it (the file comment);
    // ranking is all the builder reads of a deterministic drafter's row.
    float* out = rows_.data() + r * nv;
    for (int32_t t : candidates_) {
      double all_wrong = 1.0;
      for (std::size_t i = 0; i < members_.size(); ++i) {
        if (!members_[i].active) continue;
        const RowSummary& s = summaries_[i][r];
        const float logit = member_rows_[i][r * nv + t];
        if (s.first < 0 || logit == kNone) continue;
        const double right =
            members_[i].Calibrated(1.0f / s.sum) * std::exp(static_cast<double>(logit - s.max));
        all_wrong *= 1.0 - std::clamp(right, 0.0, 1.0 - 1e-6);
      }
      out[t] = static_cast<float>(std::log(1.0 - all_wrong));
    }
  }
}

std::span<const float> DrafterMixture::Expand(const TokenTree& tree,
                                              std::span<const int32_t> frontier) {
  if (frontier.size() == 1 && frontier[0] == -1) {
    ChooseMembers(tree, frontier);
  } else {
    ExpandMembers(tree, frontier);
  }
  Merge(frontier.size());
  return {rows_.data(), rows_.size()};
}

void DrafterMixture::Learn(const TokenTree& tree, std::span<const int32_t> accepted,
                           int32_t next_token) {
  for (Member& m : members_) {
    if (!m.active) continue;
    // The path: the root, then each accepted node; the token that followed each.
    for (std::size_t j = 0; j <= accepted.size(); ++j) {
      const int32_t node = j == 0 ? -1 : accepted[j - 1];
      const std::size_t slot = static_cast<std::size_t>(node + 1);
      if (slot >= m.first_choice.size() || m.first_choice[slot] < 0) continue;
      const int32_t followed = j < accepted.size() ? tree.node(accepted[j]).token : next_token;
      const bool right = m.first_choice[slot] == followed;
      ++m.stats.first_choices;
      m.stats.right += right;
      // A running mean at first, then a moving average: the first few choices count fully.
      const double rate = 1.0 / std::min<double>(m.stats.first_choices, kWeightMemory);
      m.weight += rate * ((right ? 1.0 : 0.0) - m.weight);
      const int band = Bucket(m.first_share[slot]);
      m.bucket_hit[band] += ((right ? 1.0 : 0.0) - m.bucket_hit[band]) /
                            std::min<double>(++m.bucket_seen[band] + 1, kWeightMemory);
      if (node == -1 && m.confident_root) {
        ++m.confident_seen;
        m.confident_hit += ((right ? 1.0 : 0.0) - m.confident_hit) /
                           std::min<double>(m.confident_seen, kWeightMemory);
      }
    }
  }
}

void DrafterMixture::Commit(const TokenTree& tree, std::span<const int32_t> accepted,
                            int32_t next_token) {
  Learn(tree, accepted, next_token);
  for (Member& m : members_) {
    m.drafter->Commit(tree, accepted, next_token);
    m.active = false;
    m.confident_root = false;
    std::fill(m.first_choice.begin(), m.first_choice.end(), -1);
  }
}

void DrafterMixture::End() {
  for (Member& m : members_) m.drafter->End();
}

std::vector<MixtureMemberStats> DrafterMixture::member_stats() const {
  std::vector<MixtureMemberStats> out;
  for (const Member& m : members_) {
    out.push_back(m.stats);
    out.back().weight = m.weight;
  }
  return out;
}

}  // namespace grove
