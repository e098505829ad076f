// Rule names, the losslessness check, and the tree walk shared by every rule. The per-node
// rejection step of chain / specinfer / sequoia is in verify_rejection.cc.
#include "speculate/verify.h"

#include <algorithm>
#include <array>
#include <utility>

#include "base/error.h"
#include "sample/sampler.h"

namespace grove {
namespace {

constexpr std::array<std::pair<VerifyRule, std::string_view>, 5> kRuleNames = {{
    {VerifyRule::kGreedy, "greedy"},
    {VerifyRule::kChain, "chain"},
    {VerifyRule::kSpecInfer, "specinfer"},
    {VerifyRule::kSequoia, "sequoia"},
    {VerifyRule::kTargetSample, "target-sample"},
}};

constexpr std::array<std::pair<ChildDraw, std::string_view>, 3> kDrawNames = {{
    {ChildDraw::kDeterministic, "deterministic"},
    {ChildDraw::kWithReplacement, "with-replacement"},
    {ChildDraw::kWithoutReplacement, "without-replacement"},
}};

template <typename Enum, size_t N>
std::string_view NameOf(const std::array<std::pair<Enum, std::string_view>, N>& names, Enum value) {
  for (const auto& [v, text] : names) {
    if (v == value) return text;
  }
  return "?";
}

template <typename Enum, size_t N>
Enum ParseName(const std::array<std::pair<Enum, std::string_view>, N>& names, std::string_view name,
               std::string_view what) {
  for (const auto& [value, text] : names) {
    if (text == name) return value;
  }
  std::string known;
  for (const auto& [value, text] : names)
    known += StrCat(known.empty() ? "" : ", ", "'", text, "'");
  Fail("unknown ", what, " '", name, "' (known: ", known, ")");
}

// The first node (-1 for the root) with at least two children, or -2 if every node has at most one.
int32_t FirstBranchingNode(const TokenTree& tree) {
  for (int32_t v = -1; v < tree.size(); ++v) {
    if (tree.children(v).size() >= 2) return v;
  }
  return -2;
}

std::string NodeName(int32_t v) { return v < 0 ? std::string("the root") : StrCat("node ", v); }

bool IsRejectionRule(VerifyRule rule) {
  return rule == VerifyRule::kChain || rule == VerifyRule::kSpecInfer ||
         rule == VerifyRule::kSequoia;
}

// The child of `node` whose token is `token` (the first one if siblings repeat), or -1.
int32_t ChildWithToken(const TokenTree& tree, int32_t node, int32_t token) {
  for (int32_t c : tree.children(node)) {
    if (tree.node(c).token == token) return c;
  }
  return -1;
}

// Throws grove::Error unless the rule can verify `tree`: tokens in the vocabulary, the draft rows a
// rejection rule reads, and a chain for the chain rule.
void CheckVerifyInputs(VerifyRule rule, const TokenTree& tree, int32_t n_vocab,
                       const ProbRows& draft) {
  const std::string_view rule_name = VerifyRuleName(rule);
  if (n_vocab <= 0) Fail("verify: rule '", rule_name, "': no target rows");
  const bool uses_draft = IsRejectionRule(rule);
  int32_t last_parent = -1;  // the draft rows needed: up to the last node with children
  for (int32_t v = 0; v < tree.size(); ++v) {
    const int32_t token = tree.node(v).token;
    if (token < 0 || token >= n_vocab) {
      Fail("verify: rule '", rule_name, "': node ", v, " has token ", token,
           ", outside the vocabulary of ", n_vocab);
    }
    if (!tree.children(v).empty()) last_parent = v;
  }
  if (uses_draft && !tree.empty()) {
    if (draft.data == nullptr || draft.n_vocab != n_vocab || draft.n_rows < last_parent + 2) {
      Fail("verify: rule '", rule_name, "': draft rows (", draft.n_rows, " x ", draft.n_vocab,
           ") do not cover the tree: need ", last_parent + 2, " rows of the target's ", n_vocab,
           " tokens");
    }
  }
  if (rule == VerifyRule::kChain) {
    if (const int32_t v = FirstBranchingNode(tree); v != -2) {
      Fail("verify: rule 'chain': ", NodeName(v), " has ", tree.children(v).size(),
           " children (a chain has one)");
    }
  }
}

}  // namespace

std::string_view VerifyRuleName(VerifyRule rule) { return NameOf(kRuleNames, rule); }

VerifyRule ParseVerifyRule(std::string_view name) {
  return ParseName(kRuleNames, name, "verify rule");
}

std::string_view ChildDrawName(ChildDraw draw) { return NameOf(kDrawNames, draw); }

ChildDraw ParseChildDraw(std::string_view name) {
  return ParseName(kDrawNames, name, "child draw mode");
}

VerifyRule DefaultVerifyRule(bool greedy_sampling, bool deterministic_children) {
  if (greedy_sampling) return VerifyRule::kGreedy;
  return deterministic_children ? VerifyRule::kTargetSample : VerifyRule::kSequoia;
}

ChildDraw RequiredChildDraw(VerifyRule rule) {
  switch (rule) {
    case VerifyRule::kChain:
    case VerifyRule::kSpecInfer:
      return ChildDraw::kWithReplacement;
    case VerifyRule::kSequoia:
      return ChildDraw::kWithoutReplacement;
    case VerifyRule::kGreedy:
    case VerifyRule::kTargetSample:
      break;
  }
  return ChildDraw::kDeterministic;
}

void CheckLossless(VerifyRule rule, ChildDraw draw, const TokenTree& tree, bool greedy_sampling) {
  const std::string_view rule_name = VerifyRuleName(rule);
  const std::string_view draw_name = ChildDrawName(draw);
  const int32_t branching = FirstBranchingNode(tree);
  switch (rule) {
    case VerifyRule::kTargetSample:
      return;  // every emitted token is a target sample; the tree only decides how many match
    case VerifyRule::kGreedy:
      if (!greedy_sampling) {
        Fail("verify: rule 'greedy' (children ", draw_name,
             ") emits the target argmax, which is not the ",
             "target distribution at temperature > 0; use 'target-sample', 'specinfer' or "
             "'sequoia'");
      }
      return;
    case VerifyRule::kChain:
      // Leviathan et al. decide one draft token per position; a sibling has no rule to be tried.
      if (branching != -2) {
        Fail("verify: rule 'chain' (children ", draw_name, ") needs a chain, but ",
             NodeName(branching), " has ", tree.children(branching).size(),
             " children; use 'specinfer' or 'sequoia' for trees");
      }
      break;
    case VerifyRule::kSpecInfer:
    case VerifyRule::kSequoia:
      break;
  }
  // At temperature 0 the target rows are one-hot at a: a child is accepted iff it is a, and the
  // residual after rejecting any other token stays one-hot at a, so every draw mode is exact.
  if (greedy_sampling) return;
  if (draw == ChildDraw::kDeterministic) {
    Fail("verify: rule '", rule_name, "' with children drawn ", draw_name,
         " (e.g. draft top-k) is not lossless at temperature > 0: its accept test min(1, p/q) "
         "assumes ",
         "each child was sampled from the draft q; use 'target-sample' for deterministic trees");
  }
  // A lone child is one draw from q either way, so the draw modes differ only where a node
  // branches.
  if (branching == -2) return;
  if (rule == VerifyRule::kSpecInfer && draw == ChildDraw::kWithoutReplacement) {
    Fail("verify: rule 'specinfer' with children drawn ", draw_name,
         " is not lossless: it tests every ", "child against the unchanged draft q, but ",
         NodeName(branching),
         "'s later children were drawn with earlier siblings removed; use 'sequoia'");
  }
  if (rule == VerifyRule::kSequoia && draw == ChildDraw::kWithReplacement) {
    Fail("verify: rule 'sequoia' with children drawn ", draw_name,
         " is not lossless: it tests each ",
         "child against the draft with earlier siblings removed, but ", NodeName(branching),
         "'s children were drawn i.i.d. from q; use 'specinfer'");
  }
}

void Verifier::Verify(VerifyRule rule, const TokenTree& tree, const ProbRows& target,
                      const ProbRows& draft, const CounterRng& rng, uint64_t sequence,
                      int64_t root_position, VerifyResult& result) {
  const std::string_view rule_name = VerifyRuleName(rule);
  if (target.n_vocab <= 0 || target.data == nullptr)
    Fail("verify: rule '", rule_name, "': no target rows");
  if (target.n_rows < tree.size() + 1) {
    Fail("verify: rule '", rule_name, "': ", target.n_rows, " target rows for a tree of ",
         tree.size(), " nodes (need one after the root and one after each node: ", tree.size() + 1,
         ")");
  }
  Verify(
      rule, tree, [&](int32_t row) { return target.Row(row); }, target.n_vocab, draft, rng,
      sequence, root_position, result);
}

void Verifier::Verify(VerifyRule rule, const TokenTree& tree, TargetRowFn target_row,
                      int32_t n_vocab, const ProbRows& draft, const CounterRng& rng,
                      uint64_t sequence, int64_t root_position, VerifyResult& result) {
  CheckVerifyInputs(rule, tree, n_vocab, draft);
  result.accepted.clear();
  int32_t node = -1;
  int64_t position = root_position + 1;  // position of the token decided at `node`
  for (;; ++position) {
    const std::span<const float> p = target_row(node + 1);
    GROVE_CHECK(p.size() == static_cast<std::size_t>(n_vocab), "verify: target row of ", p.size(),
                " entries");
    const uint64_t pos = static_cast<uint64_t>(position);
    int32_t next = -1;
    if (tree.children(node).empty()) {
      // Nothing speculated here: one plain sample from the target (draw 0, as Sampler::Sample).
      result.next_token = rule == VerifyRule::kGreedy
                              ? Sampler::Argmax(p)
                              : Sampler::DrawFrom(p, rng.Uniform(sequence, pos, 0));
      return;
    }
    switch (rule) {
      case VerifyRule::kGreedy:
        result.next_token = Sampler::Argmax(p);
        next = ChildWithToken(tree, node, result.next_token);
        break;
      case VerifyRule::kTargetSample:
        result.next_token = Sampler::DrawFrom(p, rng.Uniform(sequence, pos, 0));
        next = ChildWithToken(tree, node, result.next_token);
        break;
      case VerifyRule::kChain:
      case VerifyRule::kSpecInfer:
      case VerifyRule::kSequoia:
        next = RejectAtNode(rule, tree, node, p, draft.Row(node + 1), rng, sequence, position,
                            result.next_token);
        break;
    }
    if (next < 0) return;
    result.accepted.push_back(next);
    node = next;
  }
}

VerifyResult Verify(VerifyRule rule, const TokenTree& tree, const ProbRows& target,
                    const ProbRows& draft, const CounterRng& rng, uint64_t sequence,
                    int64_t root_position) {
  Verifier verifier;
  VerifyResult result;
  verifier.Verify(rule, tree, target, draft, rng, sequence, root_position, result);
  return result;
}

}  // namespace grove
