#include "speculate/drafter_mixture.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "base/error.h"
#include "base/timer.h"
#include "ops/activation.h"
#include "sample/sampler.h"
#include "speculate/lookup_matches.h"

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

DrafterMixture::RowSummary DrafterMixture::Summarize(std::span<const float> row) {
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

void DrafterMixture::AddCandidates(const RowSummary& summary) {
  for (int32_t i = 0; i < summary.n_best; ++i) {
    const int32_t t = summary.best[static_cast<std::size_t>(i)];
    if (std::find(candidates_.begin(), candidates_.end(), t) == candidates_.end())
      candidates_.push_back(t);
  }
}

DrafterMixture::FadedRates::FadedRates(int32_t depths, double prior, double prior_weight,
                                       double half_life)
    : prior_(prior),
      prior_weight_(prior_weight),
      fade_(std::exp2(-1.0 / half_life)),
      tried_(static_cast<std::size_t>(depths), prior_weight),
      accepted_(tried_.size(), prior_weight * prior),
      rates_(tried_.size(), prior) {}

void DrafterMixture::FadedRates::Fade() {
  for (std::size_t k = 0; k < tried_.size(); ++k) {
    tried_[k] = prior_weight_ + fade_ * (tried_[k] - prior_weight_);
    accepted_[k] = prior_weight_ * prior_ + fade_ * (accepted_[k] - prior_weight_ * prior_);
  }
}

void DrafterMixture::FadedRates::Add(int32_t k, bool accepted) {
  if (k < 0 || static_cast<std::size_t>(k) >= tried_.size()) return;
  tried_[static_cast<std::size_t>(k)] += 1.0;
  accepted_[static_cast<std::size_t>(k)] += accepted ? 1.0 : 0.0;
}

std::span<const double> DrafterMixture::FadedRates::rates() {
  for (std::size_t k = 0; k < tried_.size(); ++k) rates_[k] = accepted_[k] / tried_[k];
  return rates_;
}

DrafterMixture::DrafterMixture(std::vector<std::unique_ptr<Drafter>> members)
    : tail_rates_(kChainDepths, kTailPrior, kTailPriorWeight, kTailHalfLifeSteps),
      tail_reach_(kChainDepths) {
  Offer({.attribution = this, .outlook = this});
  if (members.size() < 2) Fail("a drafter mixture needs at least two drafters");
  if (members.size() > 32) Fail("a drafter mixture of ", members.size(), " drafters: at most 32");
  n_vocab_ = members[0]->n_vocab();
  for (auto& d : members) {
    if (d->n_vocab() != n_vocab_) {
      Fail("drafter mixture: '", d->name(), "' has ", d->n_vocab(), " tokens, '",
           members[0]->name(), "' ", n_vocab_);
    }
    if (d->feature_reader()) {
      Fail("drafter mixture: '", d->name(),
           "' reads the target's features at every step and cannot be skipped; mix draft "
           "models, 'ngram' and 'suffix'");
    }
    if (!name_.empty()) name_ += "+";
    name_ += d->name();
    deterministic_ = deterministic_ && d->deterministic();
    Member m;
    for (int b = 0; b < kShareBuckets; ++b) {
      m.bucket_hit[b] = m.disputed_hit[b] = (b + 0.5) / kShareBuckets;
    }
    m.stats.name = std::string(d->name());
    source_names_.push_back(m.stats.name);
    m.drafter = std::move(d);
    members_.push_back(std::move(m));
  }
  member_rows_.resize(members_.size());
  summaries_.resize(members_.size());
}

void DrafterMixture::SampleChildren(bool sampled) {
  sampled_ = sampled && !deterministic_;
  for (Member& m : members_) m.drafter->SampleChildren(sampled);
}

void DrafterMixture::Begin(std::span<const int32_t> context) {
  for (Member& m : members_) m.drafter->Begin(context);
}

void DrafterMixture::Reserve(int32_t max_frontier, int32_t max_tree_nodes) {
  for (Member& m : members_) {
    m.drafter->Reserve(max_frontier, max_tree_nodes);
    m.first_choice.resize(std::max<std::size_t>(m.first_choice.size(), max_tree_nodes + 1),
                          kNotExpanded);
    m.first_share.resize(m.first_choice.size(), 0.0f);
  }
  rows_.reserve(static_cast<std::size_t>(max_frontier) * n_vocab_);
  for (auto& s : summaries_) s.reserve(static_cast<std::size_t>(max_frontier));
  candidates_.reserve(members_.size() * kCandidates);
  best_.reserve(kCandidates + 1);
  const std::size_t slots = static_cast<std::size_t>(max_tree_nodes) + 1;
  proposals_.reserve(slots * members_.size() * kCandidates);
  path_of_.resize(std::max(path_of_.size(), slots), 0);
  row_of_.resize(std::max(row_of_.size(), slots), {0, 0});
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
  m.call_cost.Add(seconds);
  step_draft_seconds_ += seconds;
  const std::size_t i = static_cast<std::size_t>(&m - members_.data());
  member_rows_[i] = rows;
  expanded_ |= 1u << i;
  const std::size_t nv = static_cast<std::size_t>(n_vocab_);
  summaries_[i].resize(frontier.size());
  for (std::size_t r = 0; r < frontier.size(); ++r) {
    const RowSummary summary = Summarize(rows.subspan(r * nv, nv));
    summaries_[i][r] = summary;
    const std::size_t slot = static_cast<std::size_t>(frontier[r]) + 1;
    if (m.first_choice.size() <= slot) {
      m.first_choice.resize(slot + 1, kNotExpanded);
      m.first_share.resize(slot + 1, 0.0f);
    }
    m.first_choice[slot] = summary.first;
    if (summary.first >= 0) m.first_share[slot] = 1.0f / summary.sum;
    if (frontier[r] < 0) {
      m.confident_root = summary.first >= 0 && 1.0f / summary.sum >= kConfidentShare;
      const LookupMatches* lookup = m.drafter->lookup_matches();
      const std::span<const int32_t> matched =
          lookup ? lookup->matched_lengths() : std::span<const int32_t>();
      m.long_match_root = r < matched.size() && matched[r] >= kLongMatch;
      m.root_done = true;
    }
  }
}

void DrafterMixture::DecideMembers(bool priceable) {
  double dearest = 0.0;
  bool all_timed = true;
  // first_choice, confident_root and root_done were cleared by the last Commit (or never set).
  for (Member& m : members_) {
    m.active = true;
    dearest = std::max(dearest, m.call_cost.seconds());
    all_timed = all_timed && m.call_cost.seconds() > 0.0;
  }
  const auto cheap = [&](const Member& m) {
    return all_timed && m.call_cost.seconds() < kCheapShare * dearest;
  };
  // Every member but the dearest expands the root now: the cheap ones to decide on, and the
  // others so that their cost is measured again (one slow first call must not keep a cheap member
  // from ever being found cheap while plain steps draft nothing).
  const int32_t root[] = {-1};
  for (Member& m : members_) {
    m.cheap = cheap(m);
    if (m.call_cost.seconds() < dearest) ExpandMember(m, root_only_, root);
  }
  reason_ = {.kind = all_timed ? StepReason::Kind::kNoneConfident : StepReason::Kind::kUntimed};
  // The cheap member that would stand in: the confident one right most often when confident, or,
  // none being confident, the one surest of its first choice.
  const Member* stand_in = nullptr;
  for (const Member& c : members_) {
    if (!cheap(c) || !c.confident_root) continue;
    if (!stand_in || c.confident_hit > stand_in->confident_hit) stand_in = &c;
  }
  const bool confident = stand_in != nullptr;
  for (const Member& c : members_) {
    if (confident || !cheap(c) || c.first_choice.empty() || c.first_choice[0] < 0) continue;
    if (!stand_in || c.first_share[0] > stand_in->first_share[0]) stand_in = &c;
  }
  stand_in_ = stand_in ? static_cast<int>(stand_in - members_.data()) : -1;
  root_class_ = !stand_in                                 ? -1
                : !confident                              ? kUnsureRoot
                : stand_in->confident_seen < kMinEvidence ? -1
                : stand_in->long_match_root               ? kLongMatchRoot
                                                          : kConfidentRoot;
  // With a record of the dear members' steps the session prices the cheap step against it;
  // without (or with no session to price it), a proven confident member stands in when it is
  // right as often as the dear one.
  const bool priced =
      priceable && root_class_ >= 0 && by_root_[root_class_].dear.seen >= kMinEvidence;
  for (Member& m : members_) {
    if (cheap(m)) continue;
    const bool covered =
        priced || (ConfidentClass(root_class_) && stand_in->confident_hit >= m.weight);
    if (stand_in && reason_.kind != StepReason::Kind::kSkipped &&
        reason_.kind != StepReason::Kind::kPriced) {
      reason_ = {.kind = priced            ? StepReason::Kind::kPriced
                         : covered         ? StepReason::Kind::kSkipped
                         : !confident      ? StepReason::Kind::kNoneConfident
                         : root_class_ < 0 ? StepReason::Kind::kUnproven
                                           : StepReason::Kind::kOutweighed,
                 .cheap = static_cast<int>(stand_in - members_.data()),
                 .dear = static_cast<int>(&m - members_.data()),
                 .share = stand_in->first_share[0],
                 .hit = stand_in->confident_hit,
                 .dear_weight = m.weight,
                 .seen = stand_in->confident_seen,
                 .long_match = root_class_ == kLongMatchRoot};
      if (priced) {
        const DearRecord& record = by_root_[root_class_].dear;
        reason_.dear_tokens = record.tokens;
        reason_.dear_nodes = record.nodes;
        reason_.dear_seconds = record.draft_seconds;
      }
    }
    m.active = !covered;
  }
  decided_ = true;
}

void DrafterMixture::DearRecord::Add(double step_tokens, double step_nodes,
                                     double step_draft_seconds) {
  const double n = std::min(static_cast<double>(++seen), kWeightMemory);
  tokens += (step_tokens - tokens) / n;
  nodes += (step_nodes - nodes) / n;
  draft_seconds += (step_draft_seconds - draft_seconds) / n;
}

DraftOutlook DrafterMixture::Prepare() {
  proposals_.clear();
  DecideMembers(/*priceable=*/true);
  DraftOutlook outlook;
  bool any_cheap = false;
  for (const Member& m : members_) {
    if (m.active) {
      outlook.level_seconds += m.call_cost.seconds();
    } else {
      outlook.cheap = true;
    }
    if (m.cheap) outlook.tail_level_seconds += m.call_cost.seconds();
    any_cheap = any_cheap || m.cheap;
  }
  if (root_class_ >= 0) outlook.continue_rates = by_root_[root_class_].chain_rates.rates();
  if (reason_.kind == StepReason::Kind::kPriced) {
    outlook.dear_tokens = reason_.dear_tokens;
    outlook.dear_nodes = reason_.dear_nodes;
    outlook.dear_draft_seconds = reason_.dear_seconds;
  }
  // Sampled children are drawn from one member's rows, and a tail's would be another's.
  if (any_cheap && !sampled_) {
    const std::span<const double> continued = tail_rates_.rates();
    double reach = 1.0;
    for (std::size_t k = 0; k < continued.size(); ++k) tail_reach_[k] = reach *= continued[k];
    outlook.tail_rates = tail_reach_;
  }
  return outlook;
}

void DrafterMixture::Decline() { TakeEveryMember(StepReason::Kind::kDeclined); }

void DrafterMixture::TakeEveryMember(StepReason::Kind instead_of_skipping) {
  for (Member& m : members_) m.active = true;
  if (reason_.kind == StepReason::Kind::kSkipped) reason_.kind = instead_of_skipping;
  if (reason_.kind == StepReason::Kind::kPriced) {
    reason_.kind = instead_of_skipping == StepReason::Kind::kDeclined
                       ? StepReason::Kind::kPricedDeclined
                       : instead_of_skipping;
  }
}

void DrafterMixture::ExpandMembers(const TokenTree& tree, std::span<const int32_t> frontier) {
  for (Member& m : members_) {
    if (m.active) ExpandMember(m, tree, frontier);
  }
}

void DrafterMixture::TracePaths(const TokenTree& tree, std::span<const int32_t> frontier) {
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

void DrafterMixture::Merge(std::span<const int32_t> frontier, bool confident_only) {
  const std::size_t nv = static_cast<std::size_t>(n_vocab_);
  rows_.assign(frontier.size() * nv, kNone);
  const auto merged = [&](std::size_t i) { return members_[i].active && (expanded_ >> i & 1u); };
  for (std::size_t r = 0; r < frontier.size(); ++r) {
    candidates_.clear();
    bool confident = !confident_only;
    for (std::size_t i = 0; i < members_.size(); ++i) {
      if (!merged(i)) continue;
      const RowSummary& s = summaries_[i][r];
      AddCandidates(s);
      confident = confident || (s.first >= 0 && 1.0f / s.sum >= kConfidentShare);
    }
    if (!confident) candidates_.clear();
    const std::size_t slot = static_cast<std::size_t>(frontier[r]) + 1;
    row_of_[slot].first = static_cast<int32_t>(proposals_.size());
    // Each candidate's chance that one of the members is right about it (the file comment);
    // ranking is all the builder reads of a deterministic drafter's row.
    float* out = rows_.data() + r * nv;
    const bool disputed = Disputed(slot);
    for (int32_t t : candidates_) {
      double all_wrong = 1.0;
      uint32_t proposed_by = 0;
      for (std::size_t i = 0; i < members_.size(); ++i) {
        if (!merged(i)) continue;
        const RowSummary& s = summaries_[i][r];
        const float logit = member_rows_[i][r * nv + t];
        if (s.first < 0 || logit == kNone) continue;
        proposed_by |= 1u << i;
        const float share = 1.0f / s.sum;
        const double hit =
            disputed ? members_[i].CalibratedWhenDisputed(share) : members_[i].Calibrated(share);
        const double right = hit * std::exp(static_cast<double>(logit - s.max));
        all_wrong *= 1.0 - std::clamp(right, 0.0, 1.0 - 1e-6);
      }
      out[t] = static_cast<float>(std::log(1.0 - all_wrong));
      proposals_.push_back({.parent_path = path_of_[slot], .token = t, .members = proposed_by});
    }
    row_of_[slot].second = static_cast<int32_t>(proposals_.size());
  }
}

std::size_t DrafterMixture::RowMember() const {
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (members_[i].active && !members_[i].drafter->deterministic()) return i;
  }
  // A cheap step: the member that stood in for the sampling one (only a stand-in deactivates it).
  GROVE_CHECK(
      (reason_.kind == StepReason::Kind::kSkipped || reason_.kind == StepReason::Kind::kPriced) &&
          reason_.cheap >= 0,
      "drafter mixture: the sampling member sits out a step nobody stands in for");
  return static_cast<std::size_t>(reason_.cheap);
}

void DrafterMixture::RecordRowMember(std::span<const int32_t> frontier, std::size_t member) {
  for (int32_t f : frontier) {
    const std::size_t slot = static_cast<std::size_t>(f) + 1;
    row_of_[slot].first = static_cast<int32_t>(proposals_.size());
    proposals_.push_back(
        {.parent_path = path_of_[slot], .token = kAnyToken, .members = 1u << member});
    row_of_[slot].second = static_cast<int32_t>(proposals_.size());
  }
}

uint32_t DrafterMixture::ProposedBy(const TokenTree& tree, int32_t node) const {
  const TreeNode& n = tree.node(node);
  const std::size_t slot = static_cast<std::size_t>(n.parent) + 1;
  if (slot >= row_of_.size()) return 0;
  for (int32_t p = row_of_[slot].first; p < row_of_[slot].second; ++p) {
    const Proposal& proposal = proposals_[static_cast<std::size_t>(p)];
    if (proposal.token == n.token || proposal.token == kAnyToken) return proposal.members;
  }
  return 0;
}

void DrafterMixture::NodeSources(const TokenTree& tree, std::vector<uint32_t>& masks) const {
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

std::string DrafterMixture::Why() const {
  std::string why = StepWhy();
  if (tail_from_ > 0) {
    why += "; past depth " + std::to_string(tail_from_) +
           " a tail of the cheap drafters' guesses, where they copy the path";
  }
  return why;
}

std::string DrafterMixture::StepWhy() const {
  const StepReason& r = reason_;
  const auto name = [&](int i) { return source_names_[static_cast<std::size_t>(i)].c_str(); };
  char text[512];  // the longest reason, numbers and names in, is over 200 characters
  switch (r.kind) {
    case StepReason::Kind::kUntimed:
      return "every drafter: their costs are not measured yet";
    case StepReason::Kind::kNoneConfident:
      return "every drafter: no cheap one is confident at the root";
    case StepReason::Kind::kUnproven:
      std::snprintf(text, sizeof(text),
                    "every drafter: %s is confident at the root (%.2f) but judged on %lld such "
                    "rows, under %lld",
                    name(r.cheap), r.share, static_cast<long long>(r.seen),
                    static_cast<long long>(kMinEvidence));
      return text;
    case StepReason::Kind::kOutweighed:
      std::snprintf(text, sizeof(text),
                    "every drafter: %s is confident at the root (%.2f) but right %.0f%% of such "
                    "times, under %s's %.0f%%",
                    name(r.cheap), r.share, 100 * r.hit, name(r.dear), 100 * r.dear_weight);
      return text;
    case StepReason::Kind::kBranching:
      std::snprintf(text, sizeof(text),
                    "every drafter: %s is confident at the root (%.2f) and proven, but this "
                    "step's planned tree samples its children from %s's distribution",
                    name(r.cheap), r.share, name(r.dear));
      return text;
    case StepReason::Kind::kDeclined:
      std::snprintf(text, sizeof(text),
                    "every drafter: %s is confident at the root (%.2f) and proven, but no chain "
                    "of it is predicted faster than a plain step",
                    name(r.cheap), r.share);
      return text;
    case StepReason::Kind::kPriced:
    case StepReason::Kind::kPricedDeclined: {
      const bool taken = r.kind == StepReason::Kind::kPriced;
      std::snprintf(text, sizeof(text),
                    "%s%s: %s is %s at the root (%.2f%s), and a chain of it is predicted %s "
                    "than %s's steps where it was (%.1f tokens from %.0f nodes and %.2f ms of "
                    "drafting)%s",
                    taken ? name(r.dear) : "every drafter", taken ? " skipped" : "", name(r.cheap),
                    r.share >= kConfidentShare ? "confident" : "unsure", r.share,
                    r.long_match ? ", after a long match" : "", taken ? "faster" : "no faster",
                    name(r.dear), r.dear_tokens, r.dear_nodes, 1e3 * r.dear_seconds,
                    taken ? "" : " or a plain step");
      return text;
    }
    case StepReason::Kind::kSkipped:
      std::snprintf(text, sizeof(text),
                    "%s skipped: %s is confident at the root (%.2f) and right %.0f%% of such "
                    "times, at least %s's %.0f%%",
                    name(r.dear), name(r.cheap), r.share, 100 * r.hit, name(r.dear),
                    100 * r.dear_weight);
      return text;
  }
  return "";
}

bool DrafterMixture::FollowedPath(const Member& m, const TokenTree& tree, int32_t node) const {
  for (int32_t v = node; v >= 0; v = tree.node(v).parent) {
    const int32_t parent = tree.node(v).parent;
    const auto slot = static_cast<std::size_t>(parent) + 1;  // parent -1 (the root): slot 0
    if (slot >= m.first_choice.size() || m.first_choice[slot] != tree.node(v).token) return false;
  }
  return true;
}

std::span<const float> DrafterMixture::ExpandTail(const TokenTree& tree,
                                                  std::span<const int32_t> frontier) {
  for (Member& m : members_) {
    // A tail goes on with the members whose first choices were the path's tokens all along: the
    // text is one they are copying.
    if (m.active && m.cheap && FollowedPath(m, tree, frontier[0])) ExpandMember(m, tree, frontier);
  }
  TracePaths(tree, frontier);
  Merge(frontier, /*confident_only=*/true);
  return {rows_.data(), rows_.size()};
}

std::span<const float> DrafterMixture::Expand(const TokenTree& tree,
                                              std::span<const int32_t> frontier) {
  const bool root = frontier.size() == 1 && frontier[0] == -1;
  // The root's rows include those DecideMembers expanded.
  if (!root) expanded_ = 0;
  // A level is expanded at once (the builder's frontier is one depth).
  if (!root && tail_from_ > 0 && tree.node(frontier[0]).depth >= tail_from_) {
    return ExpandTail(tree, frontier);
  }
  if (root) {
    if (!decided_) {  // no Prepare this step
      proposals_.clear();
      DecideMembers(/*priceable=*/false);
      // Without Prepare the tree is the plan's, not a chain (a static plan without a verify
      // curve): its children sampled from a cheap member's few tokens would exhaust them and then
      // be drawn at random (Sequoia's uniform fallback), so the sampling member takes part.
      if (sampled_) TakeEveryMember(StepReason::Kind::kBranching);
    }
    for (Member& m : members_) {
      if (m.active && !m.root_done) ExpandMember(m, tree, frontier);
    }
  } else {
    ExpandMembers(tree, frontier);
  }
  TracePaths(tree, frontier);
  if (sampled_) {
    // The rows children are drawn from, untouched (see the file comment); they stay valid until
    // the member's next Expand, which only this one's next call makes.
    const std::size_t member = RowMember();
    RecordRowMember(frontier, member);
    return member_rows_[member];
  }
  Merge(frontier, /*confident_only=*/false);
  return {rows_.data(), rows_.size()};
}

bool DrafterMixture::Disputed(std::size_t slot) const {
  int32_t agreed = -1;
  for (const Member& m : members_) {
    if (!m.active || slot >= m.first_choice.size() || m.first_choice[slot] < 0) continue;
    if (agreed >= 0 && m.first_choice[slot] != agreed) return true;
    agreed = m.first_choice[slot];
  }
  return false;
}

void DrafterMixture::Learn(const TokenTree& tree, std::span<const int32_t> accepted,
                           int32_t next_token) {
  // A running mean over the first `count` outcomes, then a moving average: the first few count
  // fully.
  const auto track = [](double& mean, bool right, double count) {
    mean += ((right ? 1.0 : 0.0) - mean) / std::min(count, kWeightMemory);
  };
  // The path: the root, then each accepted node; the token that followed each.
  for (std::size_t j = 0; j <= accepted.size(); ++j) {
    const int32_t node = j == 0 ? -1 : accepted[j - 1];
    const std::size_t slot = static_cast<std::size_t>(node) + 1;
    const int32_t followed = j < accepted.size() ? tree.node(accepted[j]).token : next_token;
    const bool disputed = Disputed(slot);
    for (Member& m : members_) {
      if (!m.active || slot >= m.first_choice.size() || m.first_choice[slot] < 0) continue;
      const bool right = m.first_choice[slot] == followed;
      ++m.stats.first_choices;
      m.stats.right += right;
      track(m.weight, right, static_cast<double>(m.stats.first_choices));
      const int band = Bucket(m.first_share[slot]);
      track(m.bucket_hit[band], right, static_cast<double>(++m.bucket_seen[band] + 1));
      if (disputed) {
        track(m.disputed_hit[band], right, static_cast<double>(++m.disputed_seen[band] + 1));
      }
      if (node == -1 && m.confident_root) {
        track(m.confident_hit, right, static_cast<double>(++m.confident_seen));
      }
    }
  }
}

void DrafterMixture::CountNodes(const TokenTree& tree, std::span<const int32_t> accepted) {
  for (int32_t node = 0; node < tree.size(); ++node) {
    const uint32_t by = ProposedBy(tree, node);
    for (std::size_t i = 0; i < members_.size(); ++i) members_[i].stats.nodes += by >> i & 1u;
  }
  for (int32_t node : accepted) {
    const uint32_t by = ProposedBy(tree, node);
    for (std::size_t i = 0; i < members_.size(); ++i) {
      members_[i].stats.accepted_nodes += by >> i & 1u;
    }
  }
}

void DrafterMixture::LearnChain(const TokenTree& tree, std::span<const int32_t> accepted) {
  // A cheap step is one a stand-in was found for (DecideMembers).
  GROVE_CHECK(root_class_ >= 0, "drafter mixture: a cheap step without a root class");
  FadedRates& chain_rates = by_root_[root_class_].chain_rates;
  chain_rates.Fade();
  // Each accepted depth was tried and accepted; the depth below the path, if the tree went on
  // there, was tried and rejected.
  const auto depths = static_cast<int32_t>(accepted.size());
  for (int32_t k = 0; k < depths; ++k) chain_rates.Add(k, true);
  const int32_t last = accepted.empty() ? -1 : accepted.back();
  if (!tree.children(last).empty()) chain_rates.Add(depths, false);
}

void DrafterMixture::LearnStandInChain(const TokenTree& tree, std::span<const int32_t> accepted,
                                       int32_t next_token) {
  // What the stand-in's chain (its first choices) would have given on this step: the target's
  // tokens are the path's whatever was drafted, so its chain's node at depth j + 1 is accepted
  // when its first choices at the path's nodes up to depth j were the tokens that followed them.
  // As far as the stand-in expanded the path (the planned tree's inner nodes, a tail's); deeper,
  // nothing is known.
  const Member& m = members_[static_cast<std::size_t>(stand_in_)];
  FadedRates& chain_rates = by_root_[root_class_].chain_rates;
  chain_rates.Fade();
  for (std::size_t j = 0; j <= accepted.size(); ++j) {
    const std::size_t slot = j == 0 ? 0 : static_cast<std::size_t>(accepted[j - 1]) + 1;
    if (slot >= m.first_choice.size() || m.first_choice[slot] == kNotExpanded) return;
    const int32_t followed = j < accepted.size() ? tree.node(accepted[j]).token : next_token;
    const bool right = m.first_choice[slot] == followed;
    chain_rates.Add(static_cast<int32_t>(j), right);
    if (!right) return;
  }
}

void DrafterMixture::LearnTail(const TokenTree& tree, std::span<const int32_t> accepted) {
  // Every node below the planned depth was proposed (the tail ends where nobody is confident);
  // it was accepted when the path reached its depth. A node past the first counts where its
  // parent was accepted.
  const auto reached = static_cast<int32_t>(accepted.size());
  for (const TreeNode& node : tree.nodes()) {
    const int32_t place = node.depth - tail_from_ - 1;
    if (place == 0 || (place > 0 && node.depth - 1 <= reached)) {
      tail_rates_.Add(place, node.depth <= reached);
    }
  }
}

void DrafterMixture::Commit(const TokenTree& tree, std::span<const int32_t> accepted,
                            int32_t next_token) {
  Learn(tree, accepted, next_token);
  CountNodes(tree, accepted);
  const bool cheap_step =
      std::any_of(members_.begin(), members_.end(), [](const Member& m) { return !m.active; });
  if (decided_ && cheap_step && !tree.empty()) LearnChain(tree, accepted);
  if (decided_ && root_class_ >= 0 && !tree.empty()) {
    RootClass& root_class = by_root_[root_class_];
    if (!cheap_step) {
      LearnStandInChain(tree, accepted, next_token);
      root_class.dear.Add(static_cast<double>(accepted.size()) + 1.0, tree.size(),
                          step_draft_seconds_);
      root_class.cheap_in_a_row = 0;
    } else if (++root_class.cheap_in_a_row >= kRecordSteps) {
      root_class.dear = DearRecord{};
      root_class.cheap_in_a_row = 0;
    }
  }
  if (decided_) tail_rates_.Fade();
  if (tail_from_ > 0) LearnTail(tree, accepted);
  for (Member& m : members_) {
    if (decided_) {
      m.stats.steps += m.active;
      m.stats.skipped += !m.active;
    }
    m.drafter->Commit(tree, accepted, next_token);
    m.active = false;
    m.root_done = false;
    m.confident_root = false;
    m.long_match_root = false;
    std::fill(m.first_choice.begin(), m.first_choice.end(), kNotExpanded);
  }
  decided_ = false;
  root_class_ = -1;
  stand_in_ = -1;
  step_draft_seconds_ = 0.0;
  expanded_ = 0;
  tail_from_ = 0;
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
