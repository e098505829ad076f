// The drafter mixture's controller: it learns how often each member's first choice is right and
// ranks merged rows by that (a member that is always right outranks one that is always wrong, even
// when the wrong one is surer of itself); it skips a dear member for steps where a cheap member is
// confident and has proven right, while still committing every step's tokens to it, and, once the
// dear member's steps are on record, offers such steps for the session to price against them; it
// refuses members it cannot mix.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "base/error.h"
#include "speculate/draft_source.h"
#include "speculate/drafter_mixture.h"
#include "speculate/lookup_matches.h"
#include "speculate/token_tree.h"
#include "test_support.h"

namespace grove {
namespace {

constexpr int32_t kVocab = 16;

// A test drafter of kVocab tokens that keeps the text committed to it (the context, then each
// step's accepted tokens and the target's), which its rows are made from.
class TextKeepingDrafter : public Drafter {
 public:
  int32_t n_vocab() const override { return kVocab; }
  void Begin(std::span<const int32_t> context) override {
    text_.assign(context.begin(), context.end());
  }
  void Commit(const TokenTree& tree, std::span<const int32_t> accepted,
              int32_t next_token) override {
    for (int32_t node : accepted) text_.push_back(tree.node(node).token);
    text_.push_back(next_token);
  }
  void Reserve(int32_t, int32_t) override {}
  bool HasRoomFor(int32_t) const override { return true; }
  const std::vector<int32_t>& text() const { return text_; }

 protected:
  std::vector<int32_t> text_;
  std::vector<float> rows_;
};

// Proposes (last token + offset) mod kVocab with logit 0 and, unless sure, a second guess one
// below; optionally slow. Keeps the committed text so the test can check it.
class CountingDrafter : public TextKeepingDrafter {
 public:
  CountingDrafter(std::string name, int32_t offset, bool sure, int sleep_us = 0,
                  bool samples = false)
      : name_(std::move(name)),
        offset_(offset),
        sure_(sure),
        sleep_us_(sleep_us),
        samples_(samples) {}
  std::string_view name() const override { return name_; }
  // samples: stands for a draft model, whose rows are a distribution to sample children from.
  bool deterministic() const override { return !samples_; }
  std::span<const float> Expand(const TokenTree& tree, std::span<const int32_t> frontier) override {
    ++expand_calls_;
    if (sleep_us_) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
    rows_.assign(frontier.size() * kVocab, -std::numeric_limits<float>::infinity());
    for (std::size_t i = 0; i < frontier.size(); ++i) {
      const int32_t last = frontier[i] < 0 ? text_.back() : tree.node(frontier[i]).token;
      const int32_t guess = (last + offset_) % kVocab;
      rows_[i * kVocab + guess] = 0.0f;
      if (!sure_) rows_[i * kVocab + (guess + kVocab - 1) % kVocab] = -0.5f;
    }
    return rows_;
  }
  int expand_calls() const { return expand_calls_; }

 private:
  std::string name_;
  int32_t offset_;
  bool sure_;
  int sleep_us_;
  bool samples_;
  int expand_calls_ = 0;
};

// The token the merged row ranks first.
int32_t Top(std::span<const float> row) {
  int32_t best = 0;
  for (int32_t t = 1; t < kVocab; ++t) {
    if (row[t] > row[best]) best = t;
  }
  return best;
}

// Whether a row proposes any token.
bool Proposes(std::span<const float> row) {
  return std::any_of(row.begin(), row.end(),
                     [](float x) { return x != -std::numeric_limits<float>::infinity(); });
}

// Runs `steps` steps of a counting text (each token the last + 1): a one-node tree with the
// mixture's first choice, accepted when right; returns whether each step's first choice was.
std::vector<bool> RunCountingText(DrafterMixture& mixture, int steps, std::vector<int32_t>& text) {
  std::vector<bool> right;
  const int32_t root[] = {-1};
  for (int s = 0; s < steps; ++s) {
    TokenTree tree;
    const int32_t first = Top(mixture.Expand(tree, root));
    const int32_t truth = (text.back() + 1) % kVocab;
    right.push_back(first == truth);
    tree.AddChild(-1, first, 1.0f);
    std::vector<int32_t> accepted;
    if (first == truth) {
      accepted.push_back(0);
      text.push_back(truth);
    }
    const int32_t next = (text.back() + 1) % kVocab;
    text.push_back(next);
    mixture.Commit(tree, accepted, next);
  }
  return right;
}

TEST(DrafterMixture, LearnsWhichMemberToBelieve) {
  std::vector<std::unique_ptr<Drafter>> members;
  members.push_back(std::make_unique<CountingDrafter>("wrong-but-sure", 2, /*sure=*/true));
  members.push_back(std::make_unique<CountingDrafter>("right-but-unsure", 1, /*sure=*/false));
  DrafterMixture mixture(std::move(members));
  EXPECT_EQ(mixture.name(), "wrong-but-sure+right-but-unsure");
  EXPECT_TRUE(mixture.deterministic());
  mixture.Reserve(1, 4);
  std::vector<int32_t> text = {3};
  mixture.Begin(text);
  const std::vector<bool> right = RunCountingText(mixture, 40, text);
  // At first the sure member's guess wins (both start as if calibrated); within a few steps the
  // right one's does, and keeps on.
  EXPECT_FALSE(right[0]);
  for (std::size_t s = 8; s < right.size(); ++s) EXPECT_TRUE(right[s]) << "step " << s;
  const std::vector<MixtureMemberStats> stats = mixture.member_stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_LT(stats[0].weight, 0.1);
  EXPECT_GT(stats[1].weight, 0.9);
  EXPECT_EQ(stats[0].right, 0);
  EXPECT_EQ(stats[1].right, stats[1].first_choices);
}

// A text of template words and numbers: at a template position both members are sure and right;
// at a number position the repeater is as sure, of a number it saw elsewhere, and wrong, while the
// modeller is unsure and right three times in five. Counted over all its rows the repeater is right
// 3 times in 4 when sure, more often than the modeller when unsure (3 in 5), so ranking by those
// rates would put the repeater's number first every time; where the two disagree, the repeater is
// never right.
class ScriptedDrafter : public TextKeepingDrafter {
 public:
  ScriptedDrafter(std::string name, bool modeller) : name_(std::move(name)), modeller_(modeller) {}
  static bool NumberAt(std::size_t pos) { return pos % 4 == 3; }
  static int32_t Truth(std::size_t pos) { return static_cast<int32_t>((pos * 7 + 3) % kVocab); }
  static bool ModellerRightAt(std::size_t pos) { return (pos / 4) % 5 < 3; }
  std::string_view name() const override { return name_; }
  bool deterministic() const override { return true; }
  std::span<const float> Expand(const TokenTree& tree, std::span<const int32_t> frontier) override {
    rows_.assign(frontier.size() * kVocab, -std::numeric_limits<float>::infinity());
    for (std::size_t i = 0; i < frontier.size(); ++i) {
      const std::size_t pos =
          text_.size() +
          (frontier[i] < 0 ? 0 : static_cast<std::size_t>(tree.node(frontier[i]).depth));
      const int32_t truth = Truth(pos);
      float* row = rows_.data() + i * kVocab;
      if (!NumberAt(pos)) {
        row[truth] = 0.0f;
      } else if (!modeller_) {
        row[(truth + 5) % kVocab] = 0.0f;  // sure, and wrong
      } else {
        row[ModellerRightAt(pos) ? truth : (truth + 9) % kVocab] = 0.0f;
        row[(truth + 11) % kVocab] = -0.5f;  // unsure: a share of 0.62
      }
    }
    return rows_;
  }

 private:
  std::string name_;
  bool modeller_;
};

TEST(DrafterMixture, RanksADisputedRowByWhoIsRightWhenTheMembersDisagree) {
  std::vector<std::unique_ptr<Drafter>> members;
  members.push_back(std::make_unique<ScriptedDrafter>("repeater", /*modeller=*/false));
  members.push_back(std::make_unique<ScriptedDrafter>("modeller", /*modeller=*/true));
  DrafterMixture mixture(std::move(members));
  mixture.Reserve(1, 4);
  std::vector<int32_t> text = {ScriptedDrafter::Truth(0)};
  mixture.Begin(text);
  const int32_t root[] = {-1};
  int numbers = 0, modellers_guess = 0, right = 0;
  for (int step = 0; step < 240; ++step) {
    // One-node trees whose node is never kept: each step adds the target's token alone, so the
    // mixture's first choice is judged at every position in turn (against that token).
    const std::size_t pos = text.size();
    TokenTree tree;
    const int32_t first = Top(mixture.Expand(tree, root));
    tree.AddChild(-1, first, 1.0f);
    const int32_t next = ScriptedDrafter::Truth(pos);
    text.push_back(next);
    mixture.Commit(tree, {}, next);
    if (step < 120 || !ScriptedDrafter::NumberAt(pos)) continue;
    ++numbers;
    const int32_t truth = ScriptedDrafter::Truth(pos);
    modellers_guess += first != (truth + 5) % kVocab;
    right += first == truth;
  }
  // After the first half every disputed number is the modeller's guess, right 3 times in 5.
  ASSERT_GT(numbers, 20);
  EXPECT_EQ(modellers_guess, numbers);
  EXPECT_GT(right, numbers / 2);
}

TEST(DrafterMixture, SkipsADearMemberWhereACheapOneHasProvenRight) {
  std::vector<std::unique_ptr<Drafter>> members;
  auto cheap = std::make_unique<CountingDrafter>("cheap", 1, /*sure=*/true);
  auto dear = std::make_unique<CountingDrafter>("dear", 1, /*sure=*/false, /*sleep_us=*/2000);
  const CountingDrafter* cheap_view = cheap.get();
  const CountingDrafter* dear_view = dear.get();
  members.push_back(std::move(dear));
  members.push_back(std::move(cheap));
  DrafterMixture mixture(std::move(members));
  mixture.Reserve(1, 4);
  std::vector<int32_t> text = {5};
  mixture.Begin(text);
  const std::vector<bool> right = RunCountingText(mixture, 30, text);
  for (bool r : right) EXPECT_TRUE(r);
  const std::vector<MixtureMemberStats> stats = mixture.member_stats();
  // Both are right; once the cheap one has been judged kMinEvidence times when confident, the
  // dear one is not asked any more.
  EXPECT_GT(stats[0].skipped, 30 - DrafterMixture::kMinEvidence - 3);
  EXPECT_EQ(stats[0].steps + stats[0].skipped, 30);
  EXPECT_EQ(dear_view->expand_calls(), stats[0].steps);
  EXPECT_EQ(stats[1].skipped, 0);
  // Every member was told every committed token, skipped or not.
  EXPECT_EQ(dear_view->text(), text);
  EXPECT_EQ(cheap_view->text(), text);
  // The last step says why the dear member sat it out.
  EXPECT_EQ(mixture.Why().rfind("dear skipped: cheap is confident at the root (1.00) and right "
                                "100% of such times",
                                0),
            0u)
      << mixture.Why();
}

// When the builder samples children, the mixture hands over one member's rows untouched (a
// distribution the rule can verify against): the sampling member's, or on a cheap step the cheap
// member's that stands in for it; each node is attributed to that member. Ranking (SampleChildren
// false) merges again.
TEST(DrafterMixture, WithSampledChildrenHandsOverOneMembersRows) {
  std::vector<std::unique_ptr<Drafter>> members;
  members.push_back(std::make_unique<CountingDrafter>("dear", 1, /*sure=*/false,
                                                      /*sleep_us=*/2000, /*samples=*/true));
  members.push_back(std::make_unique<CountingDrafter>("cheap", 1, /*sure=*/true));
  DrafterMixture mixture(std::move(members));
  EXPECT_FALSE(mixture.deterministic());
  mixture.Reserve(1, 4);
  mixture.SampleChildren(true);
  std::vector<int32_t> text = {5};
  mixture.Begin(text);
  const int32_t root[] = {-1};
  int dear_steps = 0;
  int cheap_steps = 0;
  std::vector<uint32_t> masks;
  for (int s = 0; s < 30; ++s) {
    TokenTree tree;
    // A session under an auto plan asks first (a chain is drafted when the step is cheap).
    mixture.Prepare();
    const std::span<const float> row = mixture.Expand(tree, root);
    const int32_t guess = (text.back() + 1) % kVocab;
    const int32_t second = (guess + kVocab - 1) % kVocab;
    ASSERT_EQ(row.size(), static_cast<std::size_t>(kVocab));
    EXPECT_EQ(row[guess], 0.0f) << "step " << s;
    const bool cheap_step = row[second] == -std::numeric_limits<float>::infinity();
    if (!cheap_step) {
      EXPECT_EQ(row[second], -0.5f) << "the dear member's own row, step " << s;
    }
    (cheap_step ? cheap_steps : dear_steps)++;
    tree.AddChild(-1, guess, 1.0f);
    mixture.NodeSources(tree, masks);
    ASSERT_EQ(masks.size(), 1u);
    EXPECT_EQ(masks[0], cheap_step ? 2u : 1u) << "step " << s;
    text.push_back(guess);
    const int32_t next = (guess + 1) % kVocab;
    text.push_back(next);
    mixture.Commit(tree, std::vector<int32_t>{0}, next);
  }
  // The cheap member stands in once proven, as when ranking.
  EXPECT_GT(cheap_steps, 30 - DrafterMixture::kMinEvidence - 3);
  EXPECT_GT(dear_steps, 0);

  // Without Prepare the step's tree is a planned one, which may branch: children sampled from the
  // cheap member's single token would be drawn at random after it, so the dear member's rows stay.
  {
    TokenTree tree;
    const std::span<const float> row = mixture.Expand(tree, root);
    const int32_t guess = (text.back() + 1) % kVocab;
    EXPECT_EQ(row[(guess + kVocab - 1) % kVocab], -0.5f);
    EXPECT_EQ(mixture.Why().rfind("every drafter: cheap is confident at the root", 0), 0u)
        << mixture.Why();
    tree.AddChild(-1, guess, 1.0f);
    text.push_back(guess);
    const int32_t next = (guess + 1) % kVocab;
    text.push_back(next);
    mixture.Commit(tree, std::vector<int32_t>{0}, next);
  }

  mixture.SampleChildren(false);
  TokenTree tree;
  const std::span<const float> ranked = mixture.Expand(tree, root);
  const int32_t guess = (text.back() + 1) % kVocab;
  EXPECT_EQ(Top(ranked), guess);
  EXPECT_NE(ranked[guess], 0.0f) << "a merged ranking, not a member's row";
}

// Which members proposed each node, by path (so a selection of the drafted tree, as OPT-Tree
// verifies, is attributed too), and the nodes each proposed and had accepted.
TEST(DrafterMixture, NamesTheMembersThatProposedEachNode) {
  std::vector<std::unique_ptr<Drafter>> members;
  members.push_back(std::make_unique<CountingDrafter>("a", 1, /*sure=*/true));   // last + 1
  members.push_back(std::make_unique<CountingDrafter>("b", 2, /*sure=*/false));  // last + 2, + 1
  DrafterMixture mixture(std::move(members));
  mixture.Reserve(4, 8);
  const std::vector<int32_t> context = {3};
  mixture.Begin(context);
  ASSERT_NE(mixture.attribution(), nullptr);
  TokenTree tree;
  const int32_t root[] = {-1};
  mixture.Expand(tree, root);
  EXPECT_EQ(mixture.Why(), "every drafter: their costs are not measured yet");
  const int32_t four = tree.AddChild(-1, 4, 1.0f);  // a and b
  const int32_t five = tree.AddChild(-1, 5, 1.0f);  // b
  const int32_t level[] = {four, five};
  mixture.Expand(tree, level);
  const int32_t four_five = tree.AddChild(four, 5, 1.0f);  // a and b
  const int32_t four_six = tree.AddChild(four, 6, 1.0f);   // b
  const int32_t five_six = tree.AddChild(five, 6, 1.0f);   // a and b
  const int32_t five_nine = tree.AddChild(five, 9, 1.0f);  // neither
  std::vector<uint32_t> masks;
  mixture.NodeSources(tree, masks);
  ASSERT_EQ(masks.size(), 6u);
  EXPECT_EQ(masks[four], 3u);
  EXPECT_EQ(masks[five], 2u);
  EXPECT_EQ(masks[four_five], 3u);
  EXPECT_EQ(masks[four_six], 2u);
  EXPECT_EQ(masks[five_six], 3u);
  EXPECT_EQ(masks[five_nine], 0u);
  EXPECT_EQ(mixture.Names(3), "a+b");
  EXPECT_EQ(mixture.Names(2), "b");
  TokenTree selection;  // 5 -> 6 alone, indexed anew
  selection.AddChild(selection.AddChild(-1, 5, 1.0f), 6, 1.0f);
  mixture.NodeSources(selection, masks);
  EXPECT_EQ(masks, (std::vector<uint32_t>{2u, 3u}));
  const int32_t path[] = {four, four_five};
  mixture.Commit(tree, path, 6);
  const std::vector<MixtureMemberStats> stats = mixture.member_stats();
  EXPECT_EQ(stats[0].nodes, 3);  // 4, 4-5, 5-6
  EXPECT_EQ(stats[1].nodes, 5);
  EXPECT_EQ(stats[0].accepted_nodes, 2);
  EXPECT_EQ(stats[1].accepted_nodes, 2);
}

// A slow member that is not sure of its guesses and a fast one that is, both counting on by one
// (the test text's rule); dear_view: the slow one.
std::unique_ptr<DrafterMixture> DearAndCheap(const CountingDrafter*& dear_view) {
  std::vector<std::unique_ptr<Drafter>> members;
  auto dear = std::make_unique<CountingDrafter>("dear", 1, /*sure=*/false, /*sleep_us=*/2000);
  dear_view = dear.get();
  members.push_back(std::move(dear));
  members.push_back(std::make_unique<CountingDrafter>("cheap", 1, /*sure=*/true));
  return std::make_unique<DrafterMixture>(std::move(members));
}

// Before a step's tree is chosen the mixture says whether the step is a cheap one, what a level
// then costs and how deep its chains have been accepted; a declined cheap step is drafted by every
// member.
TEST(DrafterMixture, AnnouncesCheapStepsAndTakesThemBackWhenDeclined) {
  const CountingDrafter* dear_view = nullptr;
  const std::unique_ptr<DrafterMixture> dear_and_cheap = DearAndCheap(dear_view);
  DrafterMixture& mixture = *dear_and_cheap;
  mixture.Reserve(1, 4);
  std::vector<int32_t> text = {5};
  mixture.Begin(text);
  ASSERT_EQ(mixture.outlook(), &mixture);
  RunCountingText(mixture, 20, text);  // the cheap member proves right; its one-node chains too
  const DraftOutlook outlook = mixture.Prepare();
  EXPECT_TRUE(outlook.cheap);
  EXPECT_GT(outlook.level_seconds, 0.0);
  EXPECT_LT(outlook.level_seconds, 1e-3) << "the cheap member's level, not the dear one's";
  ASSERT_EQ(outlook.continue_rates.size(), std::size_t{DrafterMixture::kChainDepths});
  EXPECT_GT(outlook.continue_rates[0], DrafterMixture::kChainPrior) << "every chain was accepted";
  EXPECT_EQ(outlook.continue_rates[1], DrafterMixture::kChainPrior) << "none was deeper";
  // Declined: the dear member drafts the step after all.
  mixture.Decline();
  EXPECT_EQ(mixture.Why().find("every drafter: cheap is confident"), 0u) << mixture.Why();
  const int calls = dear_view->expand_calls();
  TokenTree tree;
  const int32_t root[] = {-1};
  mixture.Expand(tree, root);
  EXPECT_EQ(dear_view->expand_calls(), calls + 1);
  const int32_t next = (text.back() + 1) % kVocab;
  text.push_back(next);
  mixture.Commit(tree, {}, next);
  // Taken: it does not.
  EXPECT_TRUE(mixture.Prepare().cheap);
  mixture.Expand(tree, root);
  EXPECT_EQ(dear_view->expand_calls(), calls + 1);
}

// Proposes (last + 1) mod kVocab, and the two tokens after it a little below: right, but unsure of
// its first choice (about a third of its row).
class UnsureDrafter : public TextKeepingDrafter {
 public:
  std::string_view name() const override { return "unsure"; }
  bool deterministic() const override { return true; }
  std::span<const float> Expand(const TokenTree& tree, std::span<const int32_t> frontier) override {
    rows_.assign(frontier.size() * kVocab, -std::numeric_limits<float>::infinity());
    for (std::size_t i = 0; i < frontier.size(); ++i) {
      const int32_t last = frontier[i] < 0 ? text_.back() : tree.node(frontier[i]).token;
      for (int32_t k = 1; k <= 3; ++k) rows_[i * kVocab + (last + k) % kVocab] = k == 1 ? 0 : -0.1f;
    }
    return rows_;
  }
};

// A confident cheap member right less often than the dear one does not stand in by the hit rates;
// once the dear member's steps there are on record, the step is offered as a cheap one with the
// record beside it, for the session to price (Expand without Prepare has no session pricing, and
// keeps the hit rates' rule).
TEST(DrafterMixture, PricesACheapStepAgainstTheDearStepsOnRecord) {
  std::vector<std::unique_ptr<Drafter>> members;
  auto dear = std::make_unique<CountingDrafter>("dear", 1, /*sure=*/false, /*sleep_us=*/2000);
  const CountingDrafter* dear_view = dear.get();
  members.push_back(std::move(dear));
  members.push_back(std::make_unique<CountingDrafter>("cheap", 2, /*sure=*/true));  // wrong
  DrafterMixture mixture(std::move(members));
  mixture.Reserve(1, 4);
  std::vector<int32_t> text = {5};
  mixture.Begin(text);
  // Its confident rows judged from the first step on, the cheap member is proven after
  // kMinEvidence steps; then as many dear steps are recorded, each one node verified and accepted
  // (the dear member's guess, ranked first).
  RunCountingText(mixture, 2 * DrafterMixture::kMinEvidence - 1, text);
  EXPECT_FALSE(mixture.Prepare().cheap) << "one recorded step short";
  mixture.Decline();
  RunCountingText(mixture, 1, text);
  EXPECT_EQ(mixture.Why().find("every drafter: cheap is confident at the root (1.00) but right 0%"),
            0u)
      << "without Prepare, the hit rates decide: " << mixture.Why();
  const int calls = dear_view->expand_calls();
  const DraftOutlook outlook = mixture.Prepare();
  EXPECT_TRUE(outlook.cheap);
  EXPECT_DOUBLE_EQ(outlook.dear_tokens, 2.0);
  EXPECT_DOUBLE_EQ(outlook.dear_nodes, 1.0);
  // Learnt on the dear steps, where the cheap member's first choice was never the target's token.
  ASSERT_FALSE(outlook.continue_rates.empty());
  EXPECT_LT(outlook.continue_rates[0], 0.2);
  EXPECT_GE(outlook.dear_draft_seconds, 2e-3) << "the dear member's sleep";
  EXPECT_EQ(mixture.Why().find("dear skipped: cheap is confident at the root (1.00), and a chain "
                               "of it is predicted faster than dear's steps where it was (2.0 "
                               "tokens from 1 nodes and "),
            0u)
      << mixture.Why();
  mixture.Decline();
  EXPECT_NE(mixture.Why().find("predicted no faster than dear's steps where it was"),
            std::string::npos)
      << mixture.Why();
  EXPECT_NE(mixture.Why().find("or a plain step"), std::string::npos);
  RunCountingText(mixture, 1, text);
  EXPECT_EQ(dear_view->expand_calls(), calls + 1) << "declined: the dear member drafts";
}

// A dear member (right, 2 ms a call) and a cheap one always unsure at the root, begun on a
// counting text.
struct DearAndUnsure {
  DearAndUnsure() {
    std::vector<std::unique_ptr<Drafter>> members;
    auto dear_member =
        std::make_unique<CountingDrafter>("dear", 1, /*sure=*/false, /*sleep_us=*/2000);
    dear = dear_member.get();
    members.push_back(std::move(dear_member));
    members.push_back(std::make_unique<UnsureDrafter>());
    mixture.emplace(std::move(members));
    mixture->Reserve(1, 4);
    mixture->Begin(text);
  }
  std::optional<DrafterMixture> mixture;
  const CountingDrafter* dear = nullptr;
  std::vector<int32_t> text = {5};
};

// A cheap member unsure at the root never stands in by the hit rates; once the dear steps where it
// was unsure are on record, such a step is offered for the session to price.
TEST(DrafterMixture, OffersAnUnsureCheapMembersChainOnlyAgainstARecord) {
  DearAndUnsure pair;
  DrafterMixture& mixture = *pair.mixture;
  const CountingDrafter* dear_view = pair.dear;
  std::vector<int32_t>& text = pair.text;
  // Recorded from the second step on (the first times the members).
  RunCountingText(mixture, 1 + DrafterMixture::kMinEvidence - 1, text);
  EXPECT_FALSE(mixture.Prepare().cheap);
  EXPECT_EQ(mixture.Why(), "every drafter: no cheap one is confident at the root");
  mixture.Decline();
  RunCountingText(mixture, 1, text);
  const DraftOutlook outlook = mixture.Prepare();
  EXPECT_TRUE(outlook.cheap);
  EXPECT_DOUBLE_EQ(outlook.dear_tokens, 2.0);
  // Its chain's first node was learnt on the dear steps, where its first choice was always the
  // target's token; the second, below the one-node trees, never was.
  ASSERT_GE(outlook.continue_rates.size(), 2u);
  EXPECT_GT(outlook.continue_rates[0], 0.9);
  EXPECT_DOUBLE_EQ(outlook.continue_rates[1], DrafterMixture::kChainPrior);
  EXPECT_EQ(mixture.Why().find("dear skipped: unsure is unsure at the root (0.36), and a chain of "
                               "it is predicted faster"),
            0u)
      << mixture.Why();
  const int calls = dear_view->expand_calls();
  RunCountingText(mixture, 1, text);  // taken
  EXPECT_EQ(dear_view->expand_calls(), calls);
}

// A cheap member that looks its rows up in text (as the suffix drafter does) and says how long
// each row's match was: after a long match it is right (counts on by one), after a short one it
// is as sure and wrong (counts on by two).
class LookupDrafter : public TextKeepingDrafter, public LookupMatches {
 public:
  LookupDrafter() { Offer({.lookup_matches = this}); }
  std::string_view name() const override { return "lookup"; }
  bool deterministic() const override { return true; }
  std::span<const float> Expand(const TokenTree& tree, std::span<const int32_t> frontier) override {
    rows_.assign(frontier.size() * kVocab, -std::numeric_limits<float>::infinity());
    matched_.assign(frontier.size(), long_match ? DrafterMixture::kLongMatch : 1);
    for (std::size_t i = 0; i < frontier.size(); ++i) {
      const int32_t last = frontier[i] < 0 ? text_.back() : tree.node(frontier[i]).token;
      rows_[i * kVocab + (last + (long_match ? 1 : 2)) % kVocab] = 0.0f;
    }
    return rows_;
  }
  std::span<const int32_t> matched_lengths() const override { return matched_; }
  bool long_match = true;

 private:
  std::vector<int32_t> matched_;
};

// The chance that a chain of the cheap member that would stand in goes on past its first node,
// as Prepare announces it (whether or not the step is a cheap one); -1 for none.
double FirstContinueRate(DrafterMixture& mixture, std::vector<int32_t>& text) {
  const DraftOutlook outlook = mixture.Prepare();
  const double rate = outlook.continue_rates.empty() ? -1.0 : outlook.continue_rates[0];
  RunCountingText(mixture, 1, text);  // the step Prepare began
  return rate;
}

// Cheap steps after a long match (copying a passage) and after a short one (a phrase that may go
// on otherwise) keep their chains' record apart: the short matches' failures do not price the
// long ones' chains, nor the long ones' successes the short ones'.
TEST(DrafterMixture, KeepsChainsAfterALongMatchApartFromThoseAfterAShortOne) {
  std::vector<std::unique_ptr<Drafter>> members;
  members.push_back(
      std::make_unique<CountingDrafter>("dear", 1, /*sure=*/false, /*sleep_us=*/2000));
  auto lookup = std::make_unique<LookupDrafter>();
  LookupDrafter& lookup_view = *lookup;
  members.push_back(std::move(lookup));
  DrafterMixture mixture(std::move(members));
  mixture.Reserve(1, 4);
  std::vector<int32_t> text = {5};
  mixture.Begin(text);
  // Proven on kMinEvidence confident rows, then right on the cheap steps it stands in for.
  RunCountingText(mixture, 24, text);
  const double long_rate = FirstContinueRate(mixture, text);
  EXPECT_GT(long_rate, DrafterMixture::kChainPrior) << "every chain after a long match went on";
  lookup_view.long_match = false;
  EXPECT_EQ(FirstContinueRate(mixture, text), DrafterMixture::kChainPrior)
      << "no chain after a short match yet: the prior, not the long matches' record";
  RunCountingText(mixture, 8, text);
  EXPECT_LT(FirstContinueRate(mixture, text), 0.5) << "the chains after short matches stopped";
  lookup_view.long_match = true;
  EXPECT_GE(FirstContinueRate(mixture, text), long_rate) << "the long matches' record is intact";
}

// While the cheap way wins, nothing updates the dear steps' record, and what they give changes
// with the planned tree and the text: after kRecordSteps cheap steps in a row of a class, its
// record is started over, and its steps are the dear members' until it holds kMinEvidence again.
TEST(DrafterMixture, StartsADearRecordOverAfterALongRunOfCheapSteps) {
  DearAndUnsure pair;
  DrafterMixture& mixture = *pair.mixture;
  // The first step times the members; the next kMinEvidence are on record.
  RunCountingText(mixture, 1 + DrafterMixture::kMinEvidence, pair.text);
  for (int64_t step = 0; step < DrafterMixture::kRecordSteps; ++step) {
    ASSERT_TRUE(mixture.Prepare().cheap) << step;
    RunCountingText(mixture, 1, pair.text);
  }
  EXPECT_FALSE(mixture.Prepare().cheap);
  EXPECT_EQ(mixture.Why(), "every drafter: no cheap one is confident at the root");
  mixture.Decline();
  const int calls = pair.dear->expand_calls();
  RunCountingText(mixture, DrafterMixture::kMinEvidence - 1, pair.text);
  EXPECT_EQ(pair.dear->expand_calls(), calls + DrafterMixture::kMinEvidence - 1);
  EXPECT_FALSE(mixture.Prepare().cheap) << "one recorded step short";
  mixture.Decline();
  RunCountingText(mixture, 1, pair.text);
  EXPECT_TRUE(mixture.Prepare().cheap) << mixture.Why();
}

// The chain depth with the most expected tokens per second, E(d) / (t(d + 1) + d c), against a
// plain step's 1 / t(1); within the curve's sizes.
TEST(DraftOutlook, ChoosesTheChainWorthMostOrAPlainStep) {
  std::vector<std::pair<int32_t, double>> points;
  for (int32_t n = 1; n <= 33; ++n) points.push_back({n, 1.0 + 0.1 * (n - 1)});
  const VerifyCostCurve curve(points);
  auto best = [&](const std::vector<double>& q, double c, int32_t max_depth) {
    int32_t d_best = 0;
    double rate_best = 1.0 / curve.Seconds(1), e = 1.0, reach = 1.0;
    for (int32_t d = 1; d <= max_depth && d + 1 <= curve.max_size(); ++d) {
      reach *= q[std::min<std::size_t>(d - 1, q.size() - 1)];
      e += reach;
      const double rate = e / (curve.Seconds(d + 1) + d * c);
      if (rate > rate_best * (1 + 1e-9)) {
        d_best = d;
        rate_best = rate;
      }
    }
    return d_best;
  };
  for (const std::vector<double>& q :
       {std::vector<double>{0.9}, {0.97}, {0.6}, {0.99, 0.0}, {0.95, 0.9, 0.5}}) {
    for (double c : {0.0, 0.01, 0.2}) {
      const int32_t d =
          ChooseCheapChainDepth({.cheap = true, .level_seconds = c, .continue_rates = q}, curve,
                                1.0, kMaxCheapChainDepth);
      EXPECT_EQ(d, best(q, c, kMaxCheapChainDepth)) << q[0] << " c " << c;
    }
  }
  EXPECT_EQ(ChooseCheapChainDepth({.cheap = true, .continue_rates = std::vector<double>{0.999}},
                                  curve, 1.0, kMaxCheapChainDepth),
            kMaxCheapChainDepth)
      << "worth the deepest";
  const std::vector<double> poor = {0.05};
  EXPECT_EQ(ChooseCheapChainDepth({.cheap = true, .continue_rates = poor}, curve, 1.0, 24), 0);
  const std::vector<double> one = {0.99, 0.0};
  EXPECT_EQ(ChooseCheapChainDepth({.cheap = true, .continue_rates = one}, curve, 1.0, 24), 1);
  const VerifyCostCurve short_curve({{1, 1.0}, {2, 1.01}, {3, 1.02}, {4, 1.03}, {5, 1.04}});
  const std::vector<double> sure = {0.99};
  EXPECT_EQ(ChooseCheapChainDepth({.cheap = true, .continue_rates = sure}, short_curve, 1.0, 24),
            4);
}

// With a record of the dear members' steps, a chain must be faster than T / (t(n + 1) + s) too,
// t read between the curve's sizes around n + 1.
TEST(DraftOutlook, DeclinesAChainNoFasterThanTheDearStepsOnRecord) {
  std::vector<std::pair<int32_t, double>> points;
  for (int32_t n = 1; n <= 33; ++n) points.push_back({n, 1.0 + 0.1 * (n - 1)});
  const VerifyCostCurve curve(points);
  const std::vector<double> q = {0.9};
  const DraftOutlook alone{.cheap = true, .continue_rates = q};
  const int32_t d = ChooseCheapChainDepth(alone, curve, 1.0, kMaxCheapChainDepth);
  ASSERT_GT(d, 0);
  double e = 1.0, reach = 1.0;
  for (int32_t k = 1; k <= d; ++k) e += reach *= 0.9;
  const double chain_rate = e / curve.Seconds(d + 1);
  // Dear steps of 4.5 nodes: t(5.5) = 1.45 between t(5) 1.4 and t(6) 1.5; 0.05 s drafting.
  const auto with_record = [&](double rate) {
    DraftOutlook o = alone;
    o.dear_nodes = 4.5;
    o.dear_draft_seconds = 0.05;
    o.dear_tokens = rate * (1.45 + 0.05);
    return ChooseCheapChainDepth(o, curve, 1.0, kMaxCheapChainDepth);
  };
  EXPECT_EQ(with_record(0.99 * chain_rate), d) << "slower dear steps change nothing";
  EXPECT_EQ(with_record(1.01 * chain_rate), 0) << "faster ones decline the chain";
  EXPECT_EQ(with_record(0.2), d) << "and under a plain step's rate count for nothing";
}

// The tail with the largest net gain, sum_{k<=T} Q_k - R (t(D + 1 + T) - t(D + 1) + T c), against
// a search over every T; none where the session's rate makes a row dearer than any tail node.
TEST(DraftOutlook, ChoosesTheTailWorthMostOrNone) {
  std::vector<std::pair<int32_t, double>> points;
  for (int32_t n = 1; n <= 33; ++n) points.push_back({n, 1.0 + 0.1 * (n - 1) + 0.01 * n * n});
  const VerifyCostCurve curve(points);
  auto best = [&](const std::vector<double>& q, double c, int32_t planned, double rate) {
    int32_t t_best = 0;
    double gain_best = 0.0, gained = 0.0;
    for (int32_t t = 1; planned + t <= kMaxCheapChainDepth && planned + t + 1 <= curve.max_size();
         ++t) {
      gained += q[std::min<std::size_t>(t - 1, q.size() - 1)];
      const double gain =
          gained - rate * (curve.Seconds(planned + 1 + t) - curve.Seconds(planned + 1) + t * c);
      if (gain > gain_best + 1e-9) {
        t_best = t;
        gain_best = gain;
      }
    }
    return t_best;
  };
  for (const std::vector<double>& q :
       {std::vector<double>{0.9}, {0.5}, {0.2}, {0.9, 0.8, 0.1}, {0.6, 0.6, 0.6, 0.3}}) {
    for (double rate : {0.5, 1.0, 3.0}) {
      for (int32_t planned : {1, 5, 12}) {
        const int32_t t = ChooseTailLength({.tail_level_seconds = 0.01, .tail_rates = q}, curve,
                                           1.0, planned, rate, kMaxCheapChainDepth);
        EXPECT_EQ(t, best(q, 0.01, planned, rate)) << q[0] << " rate " << rate << " D " << planned;
        EXPECT_LE(planned + t, kMaxCheapChainDepth);
      }
    }
  }
  const std::vector<double> sure = {0.95};
  EXPECT_GT(ChooseTailLength({.tail_rates = sure}, curve, 1.0, 5, 1.0, 24), 0);
  EXPECT_EQ(ChooseTailLength({.tail_rates = sure}, curve, 1.0, 5, 20.0, 24), 0)
      << "a row costs more than a sure node gives";
  EXPECT_EQ(ChooseTailLength({}, curve, 1.0, 5, 1.0, 24), 0) << "no cheap member";
  EXPECT_EQ(ChooseTailLength({.tail_rates = sure}, curve, 1.0, 24, 1.0, 24), 0) << "no room";
}

// Asked for a tail, the mixture drafts the planned levels with every member and the levels past
// them with the cheap member alone, and only where that member's first choices were the path's
// tokens all along; it learns what tail nodes are worth.
TEST(DrafterMixture, DraftsATailWithTheCheapMemberWhereItFollowsThePath) {
  const CountingDrafter* dear_view = nullptr;
  const std::unique_ptr<DrafterMixture> dear_and_cheap = DearAndCheap(dear_view);
  DrafterMixture& mixture = *dear_and_cheap;
  mixture.Reserve(1, 8);
  std::vector<int32_t> text = {5};
  mixture.Begin(text);
  RunCountingText(mixture, 12, text);  // both timed
  const DraftOutlook before = mixture.Prepare();
  ASSERT_EQ(before.tail_rates.size(), std::size_t{DrafterMixture::kChainDepths});
  EXPECT_DOUBLE_EQ(before.tail_rates[0], DrafterMixture::kTailPrior) << "no tail yet";
  EXPECT_GT(before.tail_level_seconds, 0.0);
  EXPECT_LT(before.tail_level_seconds, 1e-3) << "the cheap member's level";
  // The outlook's rates are the drafter's until its next Prepare.
  const std::vector<double> reach_before(before.tail_rates.begin(), before.tail_rates.end());
  if (before.cheap) mixture.Decline();
  mixture.DraftTail(2);
  const int calls = dear_view->expand_calls();
  TokenTree tree;
  const int32_t root[] = {-1};
  int32_t parent = -1;
  for (int32_t depth = 1; depth <= 4; ++depth) {
    const int32_t frontier[] = {parent};
    const std::span<const float> row = mixture.Expand(tree, depth == 1 ? root : frontier);
    ASSERT_TRUE(Proposes(row)) << "depth " << depth;
    parent = tree.AddChild(parent, Top(row), 1.0f);
  }
  EXPECT_EQ(dear_view->expand_calls(), calls + 2) << "the two planned levels only";
  std::vector<int32_t> accepted = {0, 1, 2, 3};
  for (int32_t v : accepted) text.push_back(tree.node(v).token);
  text.push_back((text.back() + 1) % kVocab);
  mixture.Commit(tree, accepted, text.back());
  const DraftOutlook after = mixture.Prepare();
  EXPECT_GT(after.tail_rates[0], reach_before[0]) << "both tail nodes were accepted";
  EXPECT_GT(after.tail_rates[1] / after.tail_rates[0], DrafterMixture::kTailPrior);
  EXPECT_DOUBLE_EQ(after.tail_rates[2] / after.tail_rates[1], DrafterMixture::kTailPrior)
      << "none was deeper";
  for (std::size_t k = 1; k < after.tail_rates.size(); ++k) {
    EXPECT_LE(after.tail_rates[k], after.tail_rates[k - 1])
        << "a node is accepted after its parent";
  }
  // A planned path the cheap member did not propose: no tail.
  if (after.cheap) mixture.Decline();
  mixture.DraftTail(2);
  TokenTree other;
  const int32_t guess = Top(mixture.Expand(other, root));
  other.AddChild(-1, (guess + 3) % kVocab, 1.0f);
  const int32_t first[] = {0};
  other.AddChild(0, Top(mixture.Expand(other, first)), 1.0f);
  const int32_t second[] = {1};
  EXPECT_FALSE(Proposes(mixture.Expand(other, second))) << "an empty row ends the chain";
}

// Three members (DRAFT.gguf+ngram+suffix): whichever of them is right is learnt, the last one
// and the least sure of its guesses too, and ranked first; the other two fall behind.
TEST(DrafterMixture, OfThreeMembersLearnsWhichToBelieve) {
  std::vector<std::unique_ptr<Drafter>> members;
  members.push_back(std::make_unique<CountingDrafter>("two", 2, /*sure=*/true));
  members.push_back(std::make_unique<CountingDrafter>("three", 3, /*sure=*/true));
  members.push_back(std::make_unique<CountingDrafter>("one", 1, /*sure=*/false));
  DrafterMixture mixture(std::move(members));
  EXPECT_EQ(mixture.name(), "two+three+one");
  mixture.Reserve(1, 4);
  std::vector<int32_t> text = {3};
  mixture.Begin(text);
  const std::vector<bool> right = RunCountingText(mixture, 40, text);
  EXPECT_FALSE(right[0]);
  for (std::size_t s = 8; s < right.size(); ++s) EXPECT_TRUE(right[s]) << "step " << s;
  const std::vector<MixtureMemberStats> stats = mixture.member_stats();
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_LT(stats[0].weight, 0.1);
  EXPECT_LT(stats[1].weight, 0.1);
  EXPECT_GT(stats[2].weight, 0.9);
  for (const MixtureMemberStats& m : stats) EXPECT_EQ(m.steps, 40) << m.name;
  EXPECT_EQ(stats[2].right, stats[2].first_choices);
  EXPECT_EQ(stats[0].right + stats[1].right, 0);
  // The merged row ranks the right member's guess, then its second one (last + 0, which no
  // other proposes), above the two sure, wrong ones.
  const int32_t root[] = {-1};
  TokenTree tree;
  const std::span<const float> row = mixture.Expand(tree, root);
  const int32_t last = text.back();
  EXPECT_EQ(Top(row), (last + 1) % kVocab);
  EXPECT_GT(row[last], row[(last + 2) % kVocab]);
  EXPECT_GT(row[last], row[(last + 3) % kVocab]);
}

// Of three members, each node names all of those that proposed it (bit i: member i), the third
// one's too, and each member's nodes and accepted nodes are counted.
TEST(DrafterMixture, NamesWhichOfThreeMembersProposedEachNode) {
  std::vector<std::unique_ptr<Drafter>> members;
  members.push_back(std::make_unique<CountingDrafter>("a", 1, /*sure=*/true));   // last + 1
  members.push_back(std::make_unique<CountingDrafter>("b", 2, /*sure=*/false));  // + 2, + 1
  members.push_back(std::make_unique<CountingDrafter>("c", 3, /*sure=*/false));  // + 3, + 2
  DrafterMixture mixture(std::move(members));
  mixture.Reserve(4, 8);
  const std::vector<int32_t> context = {3};
  mixture.Begin(context);
  TokenTree tree;
  const int32_t root[] = {-1};
  const std::span<const float> row = mixture.Expand(tree, root);
  // 4 by a and b, 5 by b and c, 6 by c: a token two members propose ranks above one's alone.
  EXPECT_GT(row[4], row[6]);
  EXPECT_GT(row[5], row[6]);
  const int32_t four = tree.AddChild(-1, 4, 1.0f);
  const int32_t five = tree.AddChild(-1, 5, 1.0f);
  const int32_t six = tree.AddChild(-1, 6, 1.0f);
  const int32_t seven = tree.AddChild(-1, 7, 1.0f);
  const int32_t level[] = {four, five, six};
  mixture.Expand(tree, level);
  const int32_t four_six = tree.AddChild(four, 6, 1.0f);  // b and c (5 + 1, 4 + 2)
  const int32_t six_nine = tree.AddChild(six, 9, 1.0f);   // c
  const int32_t five_six = tree.AddChild(five, 6, 1.0f);  // a and b
  const int32_t six_seven = tree.AddChild(six, 7, 1.0f);  // a and b
  std::vector<uint32_t> masks;
  mixture.NodeSources(tree, masks);
  ASSERT_EQ(masks.size(), 8u);
  EXPECT_EQ(masks[four], 3u);
  EXPECT_EQ(masks[five], 6u);
  EXPECT_EQ(masks[six], 4u);
  EXPECT_EQ(masks[seven], 0u);
  EXPECT_EQ(masks[four_six], 6u);
  EXPECT_EQ(masks[six_nine], 4u);
  EXPECT_EQ(masks[five_six], 3u);
  EXPECT_EQ(masks[six_seven], 3u);
  EXPECT_EQ(mixture.Names(7), "a+b+c");
  EXPECT_EQ(mixture.Names(5), "a+c");
  EXPECT_EQ(mixture.Names(4), "c");
  const int32_t path[] = {six, six_seven};
  mixture.Commit(tree, path, 8);
  const std::vector<MixtureMemberStats> stats = mixture.member_stats();
  EXPECT_EQ(stats[0].nodes, 3);  // 4, 5-6, 6-7
  EXPECT_EQ(stats[1].nodes, 5);  // 4, 5, 4-6, 5-6, 6-7
  EXPECT_EQ(stats[2].nodes, 4);  // 5, 6, 4-6, 6-9
  EXPECT_EQ(stats[0].accepted_nodes, 1);
  EXPECT_EQ(stats[1].accepted_nodes, 1);
  EXPECT_EQ(stats[2].accepted_nodes, 1);
}

// Of two cheap members beside a dear one, the one proven right when confident stands in for the
// dear one, wherever it stands among the members; the other, as confident and always wrong, never
// does, and the merged row of the cheap steps ranks the right one's guess.
TEST(DrafterMixture, OfTwoCheapMembersTheOneProvenRightStandsIn) {
  for (bool right_first : {false, true}) {
    SCOPED_TRACE(right_first ? "right first" : "right last");
    std::vector<std::unique_ptr<Drafter>> members;
    auto dear = std::make_unique<CountingDrafter>("dear", 1, /*sure=*/false, /*sleep_us=*/2000);
    const CountingDrafter* dear_view = dear.get();
    members.push_back(std::move(dear));
    auto right = std::make_unique<CountingDrafter>("right", 1, /*sure=*/true);
    auto wrong = std::make_unique<CountingDrafter>("wrong", 2, /*sure=*/true);
    members.push_back(right_first ? std::move(right) : std::move(wrong));
    members.push_back(right_first ? std::move(wrong) : std::move(right));
    DrafterMixture mixture(std::move(members));
    mixture.Reserve(1, 4);
    std::vector<int32_t> text = {5};
    mixture.Begin(text);
    const std::vector<bool> steps_right = RunCountingText(mixture, 30, text);
    for (std::size_t s = 4; s < steps_right.size(); ++s) EXPECT_TRUE(steps_right[s]) << s;
    const std::vector<MixtureMemberStats> stats = mixture.member_stats();
    EXPECT_GT(stats[0].skipped, 30 - DrafterMixture::kMinEvidence - 3);
    EXPECT_EQ(dear_view->expand_calls(), stats[0].steps);
    EXPECT_EQ(stats[1].skipped + stats[2].skipped, 0);
    EXPECT_EQ(dear_view->text(), text);
    EXPECT_EQ(mixture.Why().rfind("dear skipped: right is confident at the root (1.00) and right "
                                  "100% of such times",
                                  0),
              0u)
        << mixture.Why();
  }
}

TEST(DrafterMixture, RefusesWhatItCannotMix) {
  std::vector<std::unique_ptr<Drafter>> one;
  one.push_back(std::make_unique<CountingDrafter>("a", 1, true));
  EXPECT_THROW(DrafterMixture{std::move(one)}, Error);
}

// A --draft value's members: split at '+', except inside a path that holds '+' itself.
TEST(DraftSourceNames, APathHoldingAPlusIsNotSplit) {
  const std::string dir = testing::TempPath("c++") + "/models";
  std::filesystem::create_directories(dir);
  const std::string draft = dir + "/d.gguf";
  std::ofstream(draft) << "x";
  using Names = std::vector<std::string>;
  EXPECT_EQ(DraftSource::MixtureMembers(draft + "+suffix"), (Names{draft, "suffix"}));
  EXPECT_EQ(DraftSource::MixtureMembers("ngram+" + draft), (Names{"ngram", draft}));
  EXPECT_EQ(DraftSource::MixtureMembers("ngram+suffix"), (Names{"ngram", "suffix"}));
  EXPECT_EQ(DraftSource::MixtureMembers(draft), (Names{draft}));
  // Nothing named by a join: the plain split, so that the missing piece is the one named.
  EXPECT_EQ(DraftSource::MixtureMembers("/missing/x.gguf+suffix"),
            (Names{"/missing/x.gguf", "suffix"}));
}

// A mixture holds at most kMaxMembers drafters (bits of a node's mask): more are refused by count
// when the name is opened, before any member is, however many the name joins (thousands of
// pieces are not looked up one by one).
TEST(DraftSourceNames, AMixtureOfTooManyDraftersIsRefusedByCount) {
  const std::unique_ptr<Model> target = testing::MakeRandomModel(testing::TinySpec());
  ThreadPool pool(1);
  const auto error_of = [&](const std::string& name) {
    try {
      DraftSource::Open(name, *target->parameters(), pool);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string many = "ngram";
  for (std::size_t i = 1; i <= DrafterMixture::kMaxMembers; ++i) many += "+ngram";
  EXPECT_NE(error_of(many).find("joins 33 drafters with '+': a mixture holds at most 32"),
            std::string::npos)
      << error_of(many);
  std::string thousands = "x";
  for (int i = 0; i < 20000; ++i) thousands += "+x";
  EXPECT_EQ(DraftSource::MixtureMembers(thousands).size(), 20001u);
  EXPECT_NE(error_of(thousands).find("joins 20001 drafters"), std::string::npos)
      << error_of(thousands).substr(0, 200);
  // A piece longer than any path is no file (not a filesystem exception, which no caller
  // expects).
  const std::string long_piece(5000, 'a');
  EXPECT_EQ(DraftSource::MixtureMembers(long_piece + "+suffix"),
            (std::vector<std::string>{long_piece, "suffix"}));
  EXPECT_EQ(DraftSource::MixtureMembers(long_piece + "+" + long_piece).size(), 2u);
  std::vector<DraftSource> members(DrafterMixture::kMaxMembers + 1, DraftSource::PromptLookup());
  EXPECT_THROW(DraftSource::Mixture(std::move(members)), Error);
}

}  // namespace
}  // namespace grove
