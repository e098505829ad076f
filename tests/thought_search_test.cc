// Tree-of-thought BFS over the Game of 24 with scripted generators in place of a model: a correct
// oracle solves, wrong arithmetic is filtered, the requests have the documented structure and keys,
// selection keeps the best (ties in generation order), settings are validated, and the writers
// draw what the tree holds.
#include "tot/thought_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "tasks/game24_answer.h"
#include "tasks/game24_prompts.h"
#include "tasks/game24_puzzles.h"
#include "tot/search_tree_writers.h"
#include "tot/sequence_key.h"

namespace grove {
namespace {

// The numbers of a propose or value prompt ("Input: 4 9 10 13\n..." or "Value: 3/4 1 6\n").
std::vector<Rational> PromptNumbers(const std::string& prompt) {
  const std::size_t colon = prompt.find(": ");
  std::istringstream in(prompt.substr(colon + 2, prompt.find('\n') - colon - 2));
  std::vector<Rational> numbers;
  for (std::string token; in >> token;) {
    const std::size_t slash = token.find('/');
    numbers.push_back(slash == std::string::npos
                          ? Rational::Make(std::stoll(token), 1)
                          : Rational::Make(std::stoll(token.substr(0, slash)),
                                           std::stoll(token.substr(slash + 1))));
  }
  return numbers;
}

bool IsPropose(const GenerationRequest& r) { return r.prompt.starts_with("Input: "); }

// What a perfect model of the corpus writes: every natural next step (rotated by the sequence key,
// so that samples differ), and for a value prompt the solver's solution and label.
std::string OracleText(const GenerationRequest& request) {
  const std::vector<Rational> numbers = PromptNumbers(request.prompt);
  std::string text;
  if (IsPropose(request)) {
    const std::vector<Game24Step> steps = Game24NaturalSteps(numbers);
    for (std::size_t k = 0; k < steps.size(); ++k) {
      text += FormatGame24Step(steps[(k + request.sequence) % steps.size()]) + "\n";
    }
    return text;
  }
  std::vector<int> ints;
  for (const Rational& r : numbers) ints.push_back(static_cast<int>(r.num));
  const Game24Value value = EvaluateGame24(ints);
  for (const Game24Step& step : value.solution) text += FormatGame24Step(step) + "\n";
  return text + std::string(Game24LabelName(value.label)) + "\n";
}

// A generator answering each request with `text` and recording every call.
struct ScriptedGenerator {
  std::function<std::string(const GenerationRequest&)> text;
  std::vector<std::vector<GenerationRequest>> calls;

  GenerateFn Fn() {
    return [this](std::span<const GenerationRequest> requests) {
      calls.emplace_back(requests.begin(), requests.end());
      std::vector<std::string> texts;
      for (const GenerationRequest& r : requests) texts.push_back(text(r));
      return texts;
    };
  }
};

TEST(ThoughtSearchTest, OracleSolves4_9_10_13AndTheCheckerAgrees) {
  ScriptedGenerator gen{OracleText, {}};
  const std::vector<int> puzzle = {4, 9, 10, 13};
  const ThoughtSearchResult result = SolveGame24WithThoughts(puzzle, {}, gen.Fn());
  ASSERT_GE(result.tree.answer, 0) << FormatSearchTreeText(result.tree);
  EXPECT_TRUE(result.correct);
  EXPECT_TRUE(Game24CheckAnswer(puzzle, result.answer)) << result.answer;
  EXPECT_TRUE(result.answer.ends_with(" = 24")) << result.answer;

  const std::vector<int32_t> path = result.tree.AnswerPath();
  ASSERT_EQ(path.size(), 4u);
  EXPECT_EQ(path.front(), 0);
  for (std::size_t k = 0; k < path.size(); ++k) {
    const ThoughtNode& node = result.tree.nodes[static_cast<std::size_t>(path[k])];
    EXPECT_EQ(node.depth, static_cast<int32_t>(k));
    EXPECT_TRUE(node.kept);
    EXPECT_TRUE(node.on_answer_path);
    if (k > 0) {
      EXPECT_EQ(node.parent, path[k - 1]);
      EXPECT_EQ(node.value, kThoughtValueSure);
    }
  }
  const ThoughtNode& answer = result.tree.nodes[static_cast<std::size_t>(result.tree.answer)];
  EXPECT_TRUE(answer.solved);
  EXPECT_FALSE(answer.value_generated);  // one number left: no generation
  EXPECT_EQ(answer.numbers, (std::vector<Rational>{{24, 1}}));

  // Three steps; the last needs no value generation (every candidate has one number left).
  ASSERT_EQ(result.steps.size(), 3u);
  EXPECT_EQ(result.steps[0].states, 1);
  EXPECT_EQ(result.steps[0].generate.generations, 3);
  EXPECT_EQ(result.steps[1].generate.generations, 3 * result.steps[0].kept);
  EXPECT_EQ(result.steps[2].evaluate.generations, 0);
  EXPECT_EQ(result.steps[0].inconsistent, 0);
  int32_t generations = 0;
  for (const ThoughtStepStats& s : result.steps) {
    EXPECT_LE(s.kept, 5);
    EXPECT_EQ(s.kept, std::min(5, s.candidates));
    EXPECT_GE(s.generate.seconds, 0);
    generations += s.generate.generations + s.evaluate.generations;
    // The oracle's samples are rotations of one list: 3 samples, each state once per parent.
    EXPECT_EQ(s.duplicates, 2 * s.candidates);
  }
  EXPECT_EQ(result.generate.generations + result.evaluate.generations, generations);
  EXPECT_EQ(static_cast<int32_t>(gen.calls.size()), 5);  // G E G E G
  EXPECT_GE(result.seconds, 0);

  // Same settings, same tree.
  ScriptedGenerator again{OracleText, {}};
  EXPECT_EQ(FormatSearchTreeText(SolveGame24WithThoughts(puzzle, {}, again.Fn()).tree),
            FormatSearchTreeText(result.tree));
}

TEST(ThoughtSearchTest, OracleSolvesEverySurePuzzle) {
  // The oracle proposes natural steps only, so puzzles that need a fraction (likely) are out of its
  // reach; every sure one must be solved, whatever the breadth.
  int sure = 0;
  for (const Game24Puzzle& puzzle : Game24Puzzles(kGame24HeldOutSeed, 40)) {
    if (EvaluateGame24(puzzle).label != Game24Label::kSure) continue;
    ++sure;
    ScriptedGenerator gen{OracleText, {}};
    const ThoughtSearchResult result =
        SolveGame24WithThoughts(puzzle, {.thoughts = 1, .breadth = 1}, gen.Fn());
    EXPECT_TRUE(result.correct) << puzzle[0] << " " << puzzle[1] << " " << puzzle[2] << " "
                                << puzzle[3] << "\n"
                                << FormatSearchTreeText(result.tree);
  }
  EXPECT_GT(sure, 30);
}

// Step lines with wrong arithmetic, and one right step, for 4 9 10 13; the oracle elsewhere.
std::string WrongArithmeticText(const GenerationRequest& r) {
  if (r.prompt != "Input: 4 9 10 13\nPossible next steps:\n") return OracleText(r);
  return "4 + 9 = 14 (left: 10 13 14)\n"  // wrong result
         "13 - 9 = 4 (left: 4 10 10)\n"   // wrong numbers left
         "4 + 4 = 8 (left: 8 10 13)\n"    // one 4 only
         "10 / 0 = 0 (left: 0 4 9 13)\n"  // 0 is not a number of the state
         "13 - 9 = 4 (left: 4 4 10)\n"    // the one right step
         "not a step at all\n";
}

std::vector<std::string> DepthOneSteps(const SearchTree& tree) {
  std::vector<std::string> steps;
  for (const ThoughtNode& node : tree.nodes) {
    if (node.depth == 1) steps.push_back(node.step);
  }
  return steps;
}

TEST(ThoughtSearchTest, WrongArithmeticIsFilteredOut) {
  ScriptedGenerator gen{WrongArithmeticText, {}};
  const ThoughtSearchResult result = SolveGame24WithThoughts(
      std::vector<int>{4, 9, 10, 13}, {.arithmetic = Game24Arithmetic::kAsWritten}, gen.Fn());
  ASSERT_FALSE(result.steps.empty());
  const ThoughtStepStats& first = result.steps[0];
  EXPECT_EQ(first.parsed_steps, 3 * 5);  // 5 step lines in each of 3 samples
  EXPECT_EQ(first.inconsistent, 3 * 4);
  EXPECT_EQ(first.duplicates, 2);  // the right step again in samples 2 and 3
  EXPECT_EQ(first.candidates, 1);
  EXPECT_EQ(DepthOneSteps(result.tree), std::vector<std::string>{"13 - 9 = 4 (left: 4 4 10)"});
  EXPECT_TRUE(result.correct);  // and the oracle finishes from 4 4 10
  EXPECT_EQ(result.answer.substr(0, 8), "(13 - 9)") << result.answer;

  // A model that only ever writes wrong steps leaves nothing to value: the search stops.
  ScriptedGenerator wrong{
      [](const GenerationRequest&) -> std::string { return "4 + 9 = 14 (left: 10 13 14)\n"; }, {}};
  const ThoughtSearchResult none = SolveGame24WithThoughts(
      std::vector<int>{4, 9, 10, 13}, {.arithmetic = Game24Arithmetic::kAsWritten}, wrong.Fn());
  EXPECT_EQ(none.tree.answer, -1);
  EXPECT_EQ(none.answer, "");
  EXPECT_FALSE(none.correct);
  ASSERT_EQ(none.steps.size(), 1u);
  EXPECT_EQ(none.steps[0].candidates, 0);
  EXPECT_EQ(none.steps[0].evaluate.generations, 0);
  EXPECT_EQ(wrong.calls.size(), 1u);  // no E call with nothing to value
  EXPECT_EQ(none.tree.nodes.size(), 1u);
  EXPECT_EQ(none.tree.nodes[0].proposals.size(), 3u);  // the texts are kept for inspection
}

TEST(ThoughtSearchTest, ExactArithmeticRecomputesTheModelsSteps) {
  // The model's choice of numbers and operation is kept and the arithmetic redone: "4 + 9 = 14"
  // becomes 4 + 9 = 13, the wrong "left" of 13 - 9 is recomputed (and then repeats the right
  // step); steps on numbers the state does not hold are still dropped.
  ScriptedGenerator gen{WrongArithmeticText, {}};
  const ThoughtSearchResult result = SolveGame24WithThoughts(
      std::vector<int>{4, 9, 10, 13}, {.arithmetic = Game24Arithmetic::kExact}, gen.Fn());
  ASSERT_FALSE(result.steps.empty());
  const ThoughtStepStats& first = result.steps[0];
  EXPECT_EQ(first.parsed_steps, 3 * 5);
  EXPECT_EQ(first.inconsistent, 3 * 2);    // 4 + 4 and 10 / 0, in every sample
  EXPECT_EQ(first.duplicates, 1 + 2 * 3);  // the 13 - 9 repeat, then samples 2 and 3
  EXPECT_EQ(DepthOneSteps(result.tree),
            (std::vector<std::string>{"4 + 9 = 13 (left: 10 13 13)", "13 - 9 = 4 (left: 4 4 10)"}));
  EXPECT_TRUE(result.correct);
  EXPECT_TRUE(Game24CheckAnswer(std::vector<int>{4, 9, 10, 13}, result.answer)) << result.answer;
}

TEST(ThoughtSearchTest, RequestsHaveTheDocumentedStructure) {
  ScriptedGenerator gen{OracleText, {}};
  const ThoughtSearchSettings settings = {
      .thoughts = 2, .breadth = 3, .propose_max_tokens = 77, .value_max_tokens = 33, .seed = 99};
  const ThoughtSearchResult result =
      SolveGame24WithThoughts(std::vector<int>{4, 9, 10, 13}, settings, gen.Fn());
  ASSERT_EQ(result.steps.size(), 3u);
  ASSERT_EQ(gen.calls.size(), 5u);  // G1 E1 G2 E2 G3 (step 3's candidates need no generation)
  std::set<uint64_t> keys;
  std::size_t total = 0;
  for (std::size_t c = 0; c < gen.calls.size(); ++c) {
    const std::vector<GenerationRequest>& call = gen.calls[c];
    const ThoughtStepStats& step = result.steps[c / 2];
    const int32_t t = step.step;
    if (c % 2 == 0) {  // G: states x thoughts, the samples of a state sharing its prompt
      const int32_t states = c == 0 ? 1 : result.steps[c / 2 - 1].kept;
      EXPECT_EQ(step.states, states);
      ASSERT_EQ(call.size(), static_cast<std::size_t>(states * settings.thoughts));
      // The states expanded: the kept ones of the step before, best first (ties by id).
      std::vector<const ThoughtNode*> expanded;
      for (const ThoughtNode& node : result.tree.nodes) {
        if (node.depth == t - 1 && node.kept) expanded.push_back(&node);
      }
      std::stable_sort(
          expanded.begin(), expanded.end(),
          [](const ThoughtNode* a, const ThoughtNode* b) { return a->value > b->value; });
      ASSERT_EQ(expanded.size(), static_cast<std::size_t>(states));
      for (std::size_t k = 0; k < call.size(); ++k) {
        const GenerationRequest& r = call[k];
        const auto state = static_cast<int64_t>(k / 2), sample = static_cast<int64_t>(k % 2);
        EXPECT_TRUE(IsPropose(r)) << r.prompt;
        EXPECT_EQ(r.max_tokens, 77);
        EXPECT_EQ(r.sequence, ThoughtSequenceKey(99, ThoughtPhase::kGenerate, t, state, sample));
        EXPECT_EQ(r.prompt,
                  Game24ProposePrompt(expanded[static_cast<std::size_t>(state)]->numbers));
        if (sample == 0) {
          EXPECT_EQ(r.shares_prompt_with, -1);
        } else {
          ASSERT_EQ(r.shares_prompt_with, static_cast<int32_t>(state * settings.thoughts));
          EXPECT_EQ(r.prompt, call[k - 1].prompt);
        }
      }
    } else {  // E: one per candidate
      ASSERT_EQ(call.size(), static_cast<std::size_t>(step.candidates));
      EXPECT_EQ(step.evaluate.generations, step.candidates);
      std::vector<const ThoughtNode*> candidates;  // in generation order
      for (const ThoughtNode& node : result.tree.nodes) {
        if (node.depth == t) candidates.push_back(&node);
      }
      ASSERT_EQ(candidates.size(), call.size());
      for (std::size_t k = 0; k < call.size(); ++k) {
        EXPECT_EQ(call[k].prompt, Game24ValuePrompt(candidates[k]->numbers));
        EXPECT_EQ(call[k].max_tokens, 33);
        EXPECT_EQ(call[k].shares_prompt_with, -1);
        EXPECT_EQ(call[k].sequence,
                  ThoughtSequenceKey(99, ThoughtPhase::kEvaluate, t, static_cast<int64_t>(k), 0));
      }
    }
    for (const GenerationRequest& r : call) keys.insert(r.sequence);
    total += call.size();
  }
  EXPECT_EQ(keys.size(), total);  // no two generations share a key
  EXPECT_EQ(result.steps[2].evaluate.generations, 0);

  // Another seed, other keys.
  ScriptedGenerator other{OracleText, {}};
  ThoughtSearchSettings reseeded = settings;
  reseeded.seed = 100;
  SolveGame24WithThoughts(std::vector<int>{4, 9, 10, 13}, reseeded, other.Fn());
  for (const auto& call : other.calls) {
    for (const GenerationRequest& r : call) EXPECT_FALSE(keys.count(r.sequence));
  }
}

TEST(ThoughtSearchTest, KeepsTheBestAndBreaksTiesInGenerationOrder) {
  // Every value text says "likely", except for states holding a 1, which are "sure", and states
  // holding a 13, whose text has no label.
  ScriptedGenerator gen;
  gen.text = [](const GenerationRequest& r) -> std::string {
    if (IsPropose(r)) return OracleText(r);
    const std::vector<Rational> numbers = PromptNumbers(r.prompt);
    if (std::count(numbers.begin(), numbers.end(), Rational{1, 1})) return "sure\n";
    if (std::count(numbers.begin(), numbers.end(), Rational{13, 1})) return "4 + 5 = 9\n";
    return "likely\n";
  };
  const ThoughtSearchResult result = SolveGame24WithThoughts(
      std::vector<int>{4, 9, 10, 13}, {.thoughts = 1, .breadth = 4, .steps = 1}, gen.Fn());
  std::vector<const ThoughtNode*> candidates;
  for (const ThoughtNode& node : result.tree.nodes) {
    if (node.depth == 1) candidates.push_back(&node);
  }
  ASSERT_GT(candidates.size(), 4u);
  std::vector<int32_t> expected;  // sure ones first, then likely ones, each in generation order
  for (double value : {kThoughtValueSure, kThoughtValueLikely, kThoughtValueImpossible}) {
    for (const ThoughtNode* node : candidates) {
      const bool has1 = std::count(node->numbers.begin(), node->numbers.end(), Rational{1, 1});
      const bool has13 = std::count(node->numbers.begin(), node->numbers.end(), Rational{13, 1});
      const double v = has1    ? kThoughtValueSure
                       : has13 ? kThoughtValueImpossible
                               : kThoughtValueLikely;
      EXPECT_EQ(node->value, v) << node->step;
      if (v == value) expected.push_back(node->id);
    }
  }
  expected.resize(4);
  std::vector<int32_t> kept;
  for (const ThoughtNode* node : candidates) {
    if (node->kept) kept.push_back(node->id);
    if (std::count(node->numbers.begin(), node->numbers.end(), Rational{13, 1}) &&
        !std::count(node->numbers.begin(), node->numbers.end(), Rational{1, 1})) {
      EXPECT_EQ(node->label, std::nullopt);  // the text had no label
      EXPECT_EQ(node->value_text, "4 + 5 = 9\n");
    }
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(kept, expected);
  EXPECT_EQ(result.tree.answer, -1);  // one step cannot reach 24
  EXPECT_FALSE(result.correct);
}

TEST(ThoughtSearchTest, RejectsBadSettingsPuzzlesAndGenerators) {
  ScriptedGenerator gen{OracleText, {}};
  const std::vector<int> puzzle = {4, 9, 10, 13};
  auto error_of = [&](const ThoughtSearchSettings& s) -> std::string {
    try {
      SolveGame24WithThoughts(puzzle, s, gen.Fn());
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_of({.thoughts = 0}).find("thoughts must be 1 to"), std::string::npos);
  EXPECT_NE(error_of({.breadth = 0}).find("breadth must be 1 to"), std::string::npos);
  EXPECT_NE(error_of({.breadth = -3}).find("got -3"), std::string::npos);
  EXPECT_NE(error_of({.steps = 0}).find("steps must be 1 to"), std::string::npos);
  EXPECT_NE(error_of({.propose_max_tokens = 0}).find("propose_max_tokens"), std::string::npos);
  EXPECT_NE(error_of({.value_max_tokens = -1}).find("value_max_tokens"), std::string::npos);
  EXPECT_THROW(ValidateThoughtSearchSettings({.thoughts = 5000}), Error);
  EXPECT_NO_THROW(ValidateThoughtSearchSettings({}));
  EXPECT_TRUE(gen.calls.empty());  // nothing was generated for bad settings

  EXPECT_THROW(SolveGame24WithThoughts(std::vector<int>{24}, {}, gen.Fn()), Error);
  EXPECT_THROW(SolveGame24WithThoughts(std::vector<int>{1, 2, 3, 4, 5, 6, 7}, {}, gen.Fn()), Error);
  EXPECT_THROW(SolveGame24WithThoughts(std::vector<int>{4, -9, 10, 13}, {}, gen.Fn()), Error);

  const GenerateFn short_answer = [](std::span<const GenerationRequest> requests) {
    return std::vector<std::string>(requests.size() - 1);
  };
  EXPECT_THROW(SolveGame24WithThoughts(puzzle, {}, short_answer), Error);
}

TEST(ThoughtSearchTest, SequenceKeysDoNotCollide) {
  std::set<uint64_t> keys;
  int n = 0;
  for (ThoughtPhase phase : {ThoughtPhase::kGenerate, ThoughtPhase::kEvaluate}) {
    for (int64_t step = 0; step < 5; ++step) {
      for (int64_t state = 0; state < 60; ++state) {
        for (int64_t sample = 0; sample < 8; ++sample) {
          keys.insert(ThoughtSequenceKey(7, phase, step, state, sample));
          ++n;
        }
      }
    }
  }
  EXPECT_EQ(keys.size(), static_cast<std::size_t>(n));
  EXPECT_EQ(ThoughtSequenceKey(7, ThoughtPhase::kGenerate, 1, 2, 3),
            ThoughtSequenceKey(7, ThoughtPhase::kGenerate, 1, 2, 3));
  EXPECT_NE(ThoughtSequenceKey(7, ThoughtPhase::kGenerate, 1, 2, 3),
            ThoughtSequenceKey(8, ThoughtPhase::kGenerate, 1, 2, 3));
  EXPECT_THROW(ThoughtSequenceKey(7, ThoughtPhase::kGenerate, kMaxSequenceKeyStep, 0, 0), Error);
  EXPECT_THROW(ThoughtSequenceKey(7, ThoughtPhase::kGenerate, 1, -1, 0), Error);
  EXPECT_THROW(ThoughtSequenceKey(7, ThoughtPhase::kGenerate, 1, 0, kMaxSequenceKeySample), Error);
}

std::size_t Count(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

TEST(ThoughtSearchTest, WritersShowTheTree) {
  ScriptedGenerator gen{OracleText, {}};
  const ThoughtSearchResult result = SolveGame24WithThoughts(
      std::vector<int>{4, 9, 10, 13}, {.thoughts = 1, .breadth = 2}, gen.Fn());
  const SearchTree& tree = result.tree;
  ASSERT_GE(tree.answer, 0);
  const std::size_t nodes = tree.nodes.size();
  const std::size_t path = tree.AnswerPath().size();

  const std::string text = FormatSearchTreeText(tree);
  EXPECT_EQ(Count(text, "\n"), nodes);
  EXPECT_TRUE(text.starts_with("4 9 10 13  [answer path]\n")) << text;
  EXPECT_EQ(Count(text, "answer path]"), path - 1);
  EXPECT_EQ(Count(text, ", answer]"), 1u);
  EXPECT_NE(text.find("      " + tree.nodes[static_cast<std::size_t>(tree.answer)].step +
                      "  [20 sure (one number left), kept, answer]\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(Count(text, "kept"),
            static_cast<std::size_t>(std::count_if(tree.nodes.begin() + 1, tree.nodes.end(),
                                                   [](const ThoughtNode& n) { return n.kept; })));

  const std::string dot = SearchTreeDot(tree);
  EXPECT_TRUE(dot.starts_with("digraph ")) << dot;
  EXPECT_TRUE(dot.ends_with("}\n"));
  EXPECT_EQ(Count(dot, " -> "), nodes - 1);
  EXPECT_EQ(Count(dot, "penwidth=3"), path + (path - 1));  // answer nodes and edges
  EXPECT_NE(dot.find("n0 [label=\"4 9 10 13\""), std::string::npos) << dot;

  const std::string svg = SearchTreeSvg(tree);
  EXPECT_TRUE(svg.starts_with("<?xml")) << svg;
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_TRUE(svg.ends_with("</svg>\n"));
  EXPECT_EQ(Count(svg, "<rect "), nodes + 1);  // a box per node and the background
  EXPECT_EQ(Count(svg, "<line "), nodes - 1);
  EXPECT_EQ(Count(svg, "stroke-width=\"3\""), path + (path - 1));
  EXPECT_NE(svg.find(">13 - 9 = 4 (left: 4 4 10)</text>"), std::string::npos);

  // Text that needs escaping is escaped.
  SearchTree odd;
  odd.nodes.push_back({.numbers = {{1, 1}}});
  odd.nodes.push_back({.id = 1, .parent = 0, .depth = 1, .step = "a<b & \"c\"", .kept = true});
  EXPECT_NE(SearchTreeSvg(odd).find("a&lt;b &amp; &#34;c&#34;"), std::string::npos);
  EXPECT_NE(SearchTreeDot(odd).find("a<b & \\\"c\\\""), std::string::npos);
  EXPECT_NE(SearchTreeSvg(SearchTree{}).find("<svg"), std::string::npos);
  EXPECT_EQ(FormatSearchTreeText(SearchTree{}), "");
}

}  // namespace
}  // namespace grove
