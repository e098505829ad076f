#include "speculate/mixture_member_choice.h"

#include <algorithm>
#include <cstdio>

#include "base/error.h"

namespace grove {

void MemberChoice::Begin(std::span<MixtureMember> members) {
  dearest_ = 0.0;
  all_timed_ = true;
  // first_choice, confident_root and root_done were cleared by the last step's end (or never set).
  for (MixtureMember& m : members) {
    m.active = true;
    dearest_ = std::max(dearest_, m.call_cost.seconds());
    all_timed_ = all_timed_ && m.call_cost.seconds() > 0.0;
  }
  for (MixtureMember& m : members) m.cheap = IsCheap(m);
}

const MixtureMember* MemberChoice::FindStandIn(std::span<const MixtureMember> members) const {
  const MixtureMember* stand_in = nullptr;
  for (const MixtureMember& c : members) {
    if (!IsCheap(c) || !c.confident_root) continue;
    if (!stand_in || c.confident_hit > stand_in->confident_hit) stand_in = &c;
  }
  if (stand_in) return stand_in;
  for (const MixtureMember& c : members) {
    if (!IsCheap(c) || c.FirstChoice(0) < 0) continue;
    if (!stand_in || c.first_share[0] > stand_in->first_share[0]) stand_in = &c;
  }
  return stand_in;
}

void MemberChoice::Decide(std::span<MixtureMember> members, bool priceable) {
  reason_ = {.kind = all_timed_ ? StepReason::Kind::kNoneConfident : StepReason::Kind::kUntimed};
  const MixtureMember* stand_in = FindStandIn(members);
  const bool confident = stand_in && stand_in->confident_root;
  stand_in_ = stand_in ? static_cast<int>(stand_in - members.data()) : -1;
  root_class_ = !stand_in                                 ? -1
                : !confident                              ? kUnsureRoot
                : stand_in->confident_seen < kMinEvidence ? -1
                : stand_in->long_match_root               ? kLongMatchRoot
                                                          : kConfidentRoot;
  // With a record of the dear members' steps the step planner prices the cheap step against it;
  // without (or with no planner to price it), a proven confident member stands in when it is
  // right as often as the dear one.
  const bool priced =
      priceable && root_class_ >= 0 && records_[root_class_].dear.seen >= kMinEvidence;
  for (MixtureMember& m : members) {
    if (IsCheap(m)) continue;
    const bool covered =
        priced || (ConfidentClass(root_class_) && stand_in->confident_hit >= m.weight);
    if (stand_in && reason_.kind != StepReason::Kind::kSkipped &&
        reason_.kind != StepReason::Kind::kPriced) {
      reason_ = ReasonFor(members, *stand_in, m, priced, covered);
    }
    m.active = !covered;
  }
  decided_ = true;
}

MemberChoice::StepReason MemberChoice::ReasonFor(std::span<const MixtureMember> members,
                                                 const MixtureMember& stand_in,
                                                 const MixtureMember& dear, bool priced,
                                                 bool covered) const {
  StepReason reason = {.kind = priced                     ? StepReason::Kind::kPriced
                               : covered                  ? StepReason::Kind::kSkipped
                               : !stand_in.confident_root ? StepReason::Kind::kNoneConfident
                               : root_class_ < 0          ? StepReason::Kind::kUnproven
                                                          : StepReason::Kind::kOutweighed,
                       .cheap = static_cast<int>(&stand_in - members.data()),
                       .dear = static_cast<int>(&dear - members.data()),
                       .share = stand_in.first_share[0],
                       .hit = stand_in.confident_hit,
                       .dear_weight = dear.weight,
                       .seen = stand_in.confident_seen,
                       .long_match = root_class_ == kLongMatchRoot};
  if (priced) {
    const DearRecord& record = records_[root_class_].dear;
    reason.dear_tokens = record.tokens;
    reason.dear_nodes = record.nodes;
    reason.dear_seconds = record.draft_seconds;
  }
  return reason;
}

void MemberChoice::TakeEveryMember(std::span<MixtureMember> members,
                                   StepReason::Kind instead_of_skipping) {
  for (MixtureMember& m : members) m.active = true;
  if (reason_.kind == StepReason::Kind::kSkipped) reason_.kind = instead_of_skipping;
  if (reason_.kind == StepReason::Kind::kPriced) {
    reason_.kind = instead_of_skipping == StepReason::Kind::kDeclined
                       ? StepReason::Kind::kPricedDeclined
                       : instead_of_skipping;
  }
}

std::size_t MemberChoice::RowMember(std::span<const MixtureMember> members) const {
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i].active && !members[i].drafter->deterministic()) return i;
  }
  // A cheap step: the member that stood in for the sampling one (only a stand-in deactivates it).
  GROVE_CHECK(
      (reason_.kind == StepReason::Kind::kSkipped || reason_.kind == StepReason::Kind::kPriced) &&
          reason_.cheap >= 0,
      "drafter mixture: the sampling member sits out a step nobody stands in for");
  return static_cast<std::size_t>(reason_.cheap);
}

void MemberChoice::DearRecord::Add(double step_tokens, double step_nodes,
                                   double step_draft_seconds) {
  const double n = std::min(static_cast<double>(++seen), MixtureMember::kWeightMemory);
  tokens += (step_tokens - tokens) / n;
  nodes += (step_nodes - nodes) / n;
  draft_seconds += (step_draft_seconds - draft_seconds) / n;
}

void MemberChoice::RecordStep(bool cheap_step, double tokens, double nodes, double draft_seconds) {
  if (root_class_ < 0) return;
  ClassRecord& record = records_[root_class_];
  if (!cheap_step) {
    record.dear.Add(tokens, nodes, draft_seconds);
    record.cheap_in_a_row = 0;
  } else if (++record.cheap_in_a_row >= kRecordSteps) {
    record.dear = DearRecord{};
    record.cheap_in_a_row = 0;
  }
}

void MemberChoice::EndStep() {
  decided_ = false;
  root_class_ = -1;
  stand_in_ = -1;
}

std::string MemberChoice::Why(std::span<const std::string> names) const {
  const StepReason& r = reason_;
  const auto name = [&](int i) { return names[static_cast<std::size_t>(i)].c_str(); };
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
                    r.share >= MixtureMember::kConfidentShare ? "confident" : "unsure", r.share,
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

}  // namespace grove
