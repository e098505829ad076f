// Which members of a drafter mixture (speculate/drafter_mixture.h) take part in a step.
//
// Members differ in cost by orders of magnitude (a draft model's forward against a suffix lookup in
// microseconds), so each step the mixture first asks the cheap members for the root's row and may
// skip the expensive ones for the whole step when a cheap member could stand in there: one
// confident (its first choice takes at least kConfidentShare of its row) and proven (judged on
// kMinEvidence such rows), or, none being confident, one unsure of the first choice it proposes.
// Which way is faster is priced, not guessed from hit rates alone: the steps the dear members
// drafted where a cheap member could have stood in are recorded, apart for an unsure root, a
// confident one and a confident one that followed a long match, i.e. copying a passage (the
// tokens they gave, the nodes verified, the seconds drafting), and once kMinEvidence of a class
// are, its steps are offered as cheap ones with that record beside them, and the step planner
// drafts the cheap members' chain only where it is predicted faster than both a plain step and
// the record (speculate/draft_outlook.h). On Game of 24 prompts the suffix drafter, confident at
// the root and right there 63-70% of the time against the draft model's 72-74%, lost every such
// step to it by the hit rates alone, where its chains of 5 gave 3.3 tokens a step in 2.5-2.9 ms and
// the draft model's steps 2.9 tokens in 2.8-3.1 ms. Before the record of confident roots holds
// kMinEvidence steps (and wherever no step planner prices the offer), the hit rates decide: a
// confident, proven cheap member stands in when it has been right at least as often when confident
// as the expensive member has been right at all; an unsure one never does. A skipped member
// expands nothing this step and catches up on the accepted tokens at Commit (Drafter's contract
// allows a step whose tree it did not expand).
//
// Steps, and the dear steps they are priced against, are kept apart by how sure the cheap member
// that would stand in was at the root: kConfidentRoot (and proven), or kUnsureRoot (its first
// choice there took under kConfidentShare of its row; offered only once priced). A chain that
// follows an unsure first guess is accepted less often at its first node, and the draft model's
// steps there have less to gain from the cheap members' candidates. A confident root is
// kLongMatchRoot instead when the member's row followed a match of kLongMatch tokens or more: it
// is copying a passage (a request served before, a story retold), where a chain goes on for many
// nodes; after a short match (a problem's template words around new numbers, a Game of 24 step
// line) it is confident as often but right for a node or two. One record priced both: on word
// problems in a mixed workload the chains taken there gave 0.5-0.8 tokens a millisecond where the
// draft model's steps gave 1.1.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "speculate/mixture_member.h"

namespace grove {

class MemberChoice {
 public:
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
  // A cheap member's root row follows a long match from this many tokens on: half of what the
  // suffix drafter's index holds (SuffixStore's max_depth, 16).
  static constexpr int32_t kLongMatch = 8;
  // A member costs "little" when its Expand takes under this share of the dearest member's.
  static constexpr double kCheapShare = 0.1;
  // The root classes (the file comment); -1: no cheap member may stand in.
  static constexpr int kConfidentRoot = 0;
  static constexpr int kUnsureRoot = 1;
  static constexpr int kLongMatchRoot = 2;
  static constexpr int kRootClasses = 3;
  // Either class a proven confident member stands in from (not kUnsureRoot, not -1).
  static bool ConfidentClass(int root_class) {
    return root_class == kConfidentRoot || root_class == kLongMatchRoot;
  }

  // Why a step's members took part, kept as figures and told by Why().
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
      kPricedDeclined  // ... and the step planner found no chain faster
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

  // A step starts: every member takes part, and each is cheap or not by its cost so far. The
  // members cheaper than the dearest then expand the root (the mixture) before Decide.
  void Begin(std::span<MixtureMember> members);
  double dearest_seconds() const { return dearest_; }
  // Which members take part (the file comment), from the cheap members' root rows. `priceable`:
  // the step planner prices a cheap step offered (DrafterMixture::Prepare), so the dear steps'
  // record may decide.
  void Decide(std::span<MixtureMember> members, bool priceable);
  // Every member takes part this step after all (a declined chain; or sampled children on a
  // planned tree, where no cheap member stands in); a skip's reason becomes `instead_of_skipping`.
  void TakeEveryMember(std::span<MixtureMember> members, StepReason::Kind instead_of_skipping);
  // With sampled children: the member whose rows this step's children are drawn from (the
  // sampling member when it takes part, else the cheap member standing in for it).
  std::size_t RowMember(std::span<const MixtureMember> members) const;
  // A decided step with a tree was verified: a dear one where a cheap member could have stood in
  // goes on its class's record (tokens: accepted nodes + 1; nodes: verified), and a long run of
  // cheap ones starts the record over.
  void RecordStep(bool cheap_step, double tokens, double nodes, double draft_seconds);
  // The step is over: the next one is decided anew.
  void EndStep();

  bool decided() const { return decided_; }
  const StepReason& reason() const { return reason_; }
  int root_class() const { return root_class_; }
  // The cheap member that would stand in this step (Decide), or -1.
  int stand_in() const { return stand_in_; }
  // Why this step's members took part, naming them by `names`.
  std::string Why(std::span<const std::string> names) const;

 private:
  // Moving averages of what the dear members' steps gave where a cheap member could have stood in
  // (one record per root class): running means over the first kWeightMemory steps.
  struct DearRecord {
    double tokens = 0.0;  // accepted nodes + 1
    double nodes = 0.0;   // verified (the planned tree and any tail)
    double draft_seconds = 0.0;
    int64_t seen = 0;
    void Add(double step_tokens, double step_nodes, double step_draft_seconds);
  };
  struct ClassRecord {
    DearRecord dear;
    int64_t cheap_in_a_row = 0;  // cheap steps since the last dear one
  };

  bool IsCheap(const MixtureMember& m) const {
    return all_timed_ && m.call_cost.seconds() < kCheapShare * dearest_;
  }
  // The cheap member that would stand in: the confident one right most often when confident, or,
  // none being confident, the one surest of its first choice; null for none.
  const MixtureMember* FindStandIn(std::span<const MixtureMember> members) const;
  // The reason a dear member takes part or not, when a stand-in was found.
  StepReason ReasonFor(std::span<const MixtureMember> members, const MixtureMember& stand_in,
                       const MixtureMember& dear, bool priced, bool covered) const;

  double dearest_ = 0.0;   // the dearest member's cost of a call, at the step's start
  bool all_timed_ = true;  // every member's cost is measured
  StepReason reason_;
  bool decided_ = false;  // this step's members are decided (Prepare, or the root's Expand)
  int root_class_ = -1;   // this step's
  int stand_in_ = -1;
  std::array<ClassRecord, kRootClasses> records_;
};

}  // namespace grove
