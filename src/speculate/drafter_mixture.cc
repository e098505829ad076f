#include "speculate/drafter_mixture.h"

#include <algorithm>

#include "base/error.h"
#include "base/timer.h"

namespace grove {

DrafterMixture::DrafterMixture(std::vector<std::unique_ptr<Drafter>> members) {
  Offer({.attribution = this, .outlook = this});
  if (members.size() < 2) Fail("a drafter mixture needs at least two drafters");
  if (members.size() > kMaxMembers)
    Fail("a drafter mixture of ", members.size(), " drafters: at most ", kMaxMembers);
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
    source_names_.emplace_back(d->name());
    members_.emplace_back(std::move(d));
  }
  ranking_ = CandidateRanking(members_.size(), n_vocab_);
}

void DrafterMixture::SampleChildren(bool sampled) {
  sampled_ = sampled && !deterministic_;
  for (MixtureMember& m : members_) m.drafter->SampleChildren(sampled);
}

void DrafterMixture::ReuseCache(bool reuse) {
  for (MixtureMember& m : members_) m.drafter->ReuseCache(reuse);
}

void DrafterMixture::Begin(std::span<const int32_t> context) {
  for (MixtureMember& m : members_) m.drafter->Begin(context);
}

void DrafterMixture::Reserve(int32_t max_frontier, int32_t max_tree_nodes) {
  for (MixtureMember& m : members_) {
    m.drafter->Reserve(max_frontier, max_tree_nodes);
    m.first_choice.resize(std::max<std::size_t>(m.first_choice.size(), max_tree_nodes + 1),
                          MixtureMember::kNotExpanded);
    m.first_share.resize(m.first_choice.size(), 0.0f);
  }
  ranking_.Reserve(max_frontier, max_tree_nodes);
}

bool DrafterMixture::HasRoomFor(int32_t fed_nodes) const {
  return std::all_of(members_.begin(), members_.end(),
                     [&](const MixtureMember& m) { return m.drafter->HasRoomFor(fed_nodes); });
}

void DrafterMixture::ExpandMember(MixtureMember& m, const TokenTree& tree,
                                  std::span<const int32_t> frontier) {
  Timer timer;
  const std::span<const float> rows = m.drafter->Expand(tree, frontier);
  const double seconds = timer.Seconds();
  m.stats.expand_seconds += seconds;
  m.call_cost.Add(seconds);
  step_draft_seconds_ += seconds;
  const std::size_t i = static_cast<std::size_t>(&m - members_.data());
  expanded_ |= 1u << i;
  ranking_.Summarize(i, rows, frontier, m);
  for (std::size_t r = 0; r < frontier.size(); ++r) {
    if (frontier[r] >= 0) continue;
    m.confident_root = ranking_.Confident(i, r);
    const std::span<const int32_t> matched =
        m.lookup ? m.lookup->matched_lengths() : std::span<const int32_t>();
    m.long_match_root = r < matched.size() && matched[r] >= kLongMatch;
    m.root_done = true;
  }
}

void DrafterMixture::DecideMembers(bool priceable) {
  choice_.Begin(members_);
  // Every member but the dearest expands the root now: the cheap ones to decide on, and the
  // others so that their cost is measured again (one slow first call must not keep a cheap member
  // from ever being found cheap while plain steps draft nothing).
  const int32_t root[] = {-1};
  for (MixtureMember& m : members_) {
    if (m.call_cost.seconds() < choice_.dearest_seconds()) ExpandMember(m, root_only_, root);
  }
  choice_.Decide(members_, priceable);
}

DraftOutlook DrafterMixture::Prepare() {
  ranking_.StartStep();
  DecideMembers(/*priceable=*/true);
  DraftOutlook outlook;
  bool any_cheap = false;
  for (const MixtureMember& m : members_) {
    if (m.active) {
      outlook.level_seconds += m.call_cost.seconds();
    } else {
      outlook.cheap = true;
    }
    if (m.cheap) outlook.tail_level_seconds += m.call_cost.seconds();
    any_cheap = any_cheap || m.cheap;
  }
  if (choice_.root_class() >= 0)
    outlook.continue_rates = chains_.continue_rates(choice_.root_class());
  const MemberChoice::StepReason& reason = choice_.reason();
  if (reason.kind == MemberChoice::StepReason::Kind::kPriced) {
    outlook.dear_tokens = reason.dear_tokens;
    outlook.dear_nodes = reason.dear_nodes;
    outlook.dear_draft_seconds = reason.dear_seconds;
  }
  // Sampled children are drawn from one member's rows, and a tail's would be another's.
  if (any_cheap && !sampled_) outlook.tail_rates = chains_.tail_rates();
  return outlook;
}

void DrafterMixture::Decline() {
  choice_.TakeEveryMember(members_, MemberChoice::StepReason::Kind::kDeclined);
}

bool DrafterMixture::FollowedPath(const MixtureMember& m, const TokenTree& tree,
                                  int32_t node) const {
  for (int32_t v = node; v >= 0; v = tree.node(v).parent) {
    const int32_t parent = tree.node(v).parent;
    // parent -1 (the root): slot 0
    if (m.FirstChoice(static_cast<std::size_t>(parent) + 1) != tree.node(v).token) return false;
  }
  return true;
}

std::span<const float> DrafterMixture::Expand(const TokenTree& tree,
                                              std::span<const int32_t> frontier) {
  if (frontier.size() == 1 && frontier[0] == -1) {
    ExpandRoot(tree, frontier);  // its rows include those DecideMembers expanded
    return Rows(tree, frontier);
  }
  expanded_ = 0;
  // A level is expanded at once (the builder's frontier is one depth).
  if (tail_from_ > 0 && tree.node(frontier[0]).depth >= tail_from_) {
    return ExpandTail(tree, frontier);
  }
  for (MixtureMember& m : members_) {
    if (m.active) ExpandMember(m, tree, frontier);
  }
  return Rows(tree, frontier);
}

void DrafterMixture::ExpandRoot(const TokenTree& tree, std::span<const int32_t> frontier) {
  if (!choice_.decided()) {  // no Prepare this step
    ranking_.StartStep();
    DecideMembers(/*priceable=*/false);
    // Without Prepare the tree is the plan's, not a chain (a static plan without a verify
    // curve): its children sampled from a cheap member's few tokens would exhaust them and then
    // be drawn at random (Sequoia's uniform fallback), so the sampling member takes part.
    if (sampled_) choice_.TakeEveryMember(members_, MemberChoice::StepReason::Kind::kBranching);
  }
  for (MixtureMember& m : members_) {
    if (m.active && !m.root_done) ExpandMember(m, tree, frontier);
  }
}

std::span<const float> DrafterMixture::ExpandTail(const TokenTree& tree,
                                                  std::span<const int32_t> frontier) {
  for (MixtureMember& m : members_) {
    // A tail goes on with the members whose first choices were the path's tokens all along: the
    // text is one they are copying.
    if (m.active && m.cheap && FollowedPath(m, tree, frontier[0])) ExpandMember(m, tree, frontier);
  }
  ranking_.TracePaths(tree, frontier);
  return ranking_.Merge(members_, Merged(), frontier, /*confident_only=*/true);
}

std::span<const float> DrafterMixture::Rows(const TokenTree& tree,
                                            std::span<const int32_t> frontier) {
  ranking_.TracePaths(tree, frontier);
  if (sampled_) {
    // The rows children are drawn from, untouched (see the file comment); they stay valid until
    // the member's next Expand, which only this one's next call makes.
    const std::size_t member = choice_.RowMember(members_);
    ranking_.RecordRowMember(frontier, member);
    return ranking_.member_rows(member);
  }
  return ranking_.Merge(members_, Merged(), frontier, /*confident_only=*/false);
}

uint32_t DrafterMixture::Merged() const {
  uint32_t merged = 0;
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (members_[i].active && (expanded_ >> i & 1u)) merged |= 1u << i;
  }
  return merged;
}

void DrafterMixture::NodeSources(const TokenTree& tree, std::vector<uint32_t>& masks) const {
  ranking_.NodeSources(tree, masks);
}

std::string DrafterMixture::Why() const {
  std::string why = choice_.Why(source_names_);
  if (tail_from_ > 0) {
    why += "; past depth " + std::to_string(tail_from_) +
           " a tail of the cheap drafters' guesses, where they copy the path";
  }
  return why;
}

void DrafterMixture::LearnStep(const TokenTree& tree, std::span<const int32_t> accepted,
                               int32_t next_token) {
  const bool cheap_step = std::any_of(members_.begin(), members_.end(),
                                      [](const MixtureMember& m) { return !m.active; });
  const int root_class = choice_.root_class();
  if (!tree.empty()) {
    if (cheap_step) {
      chains_.LearnChain(root_class, tree, accepted);
    } else if (root_class >= 0) {
      chains_.LearnStandInChain(root_class, members_[static_cast<std::size_t>(choice_.stand_in())],
                                tree, accepted, next_token);
    }
    choice_.RecordStep(cheap_step, static_cast<double>(accepted.size()) + 1.0, tree.size(),
                       step_draft_seconds_);
  }
  chains_.FadeTails();
}

void DrafterMixture::Commit(const TokenTree& tree, std::span<const int32_t> accepted,
                            int32_t next_token) {
  LearnFirstChoices(members_, tree, accepted, next_token);
  ranking_.CountNodes(members_, tree, accepted);
  if (choice_.decided()) LearnStep(tree, accepted, next_token);
  if (tail_from_ > 0) chains_.LearnTail(tail_from_, tree, accepted);
  for (MixtureMember& m : members_) {
    if (choice_.decided()) {
      m.stats.steps += m.active;
      m.stats.skipped += !m.active;
    }
    m.drafter->Commit(tree, accepted, next_token);
    m.EndStep();
  }
  choice_.EndStep();
  step_draft_seconds_ = 0.0;
  expanded_ = 0;
  tail_from_ = 0;
}

void DrafterMixture::End() {
  for (MixtureMember& m : members_) m.drafter->End();
}

std::vector<MixtureMemberStats> DrafterMixture::member_stats() const {
  std::vector<MixtureMemberStats> out;
  for (const MixtureMember& m : members_) {
    out.push_back(m.stats);
    out.back().weight = m.weight;
  }
  return out;
}

}  // namespace grove
