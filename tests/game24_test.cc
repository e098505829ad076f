// The Game-of-24 task: exact rationals, the solver's labels, the prompt formats, reading model text
// back (garbage included), step consistency, answers built from steps and their independent check,
// puzzle parsing and drawing.
#include "tasks/game24.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "tasks/corpus_rng.h"
#include "tasks/game24_answer.h"
#include "tasks/game24_prompts.h"
#include "tasks/game24_puzzles.h"
#include "tasks/rational.h"
#include "train/corpus_game24.h"

namespace grove {
namespace {

Rational R(int64_t num, int64_t den = 1) { return Rational::Make(num, den); }

std::vector<Rational> Numbers(std::initializer_list<int> values) {
  std::vector<Rational> v;
  for (int x : values) v.push_back(R(x));
  return v;
}

// A step as the solver writes it, parsed back (the parser is tested on its own below).
Game24Step Step(const std::string& line) {
  const std::optional<Game24Step> step = ParseGame24StepLine(line);
  EXPECT_TRUE(step.has_value()) << line;
  return step.value_or(Game24Step{});
}

TEST(Game24Test, RationalsAreNormalisedAndExact) {
  EXPECT_EQ(R(6, 4), (Rational{3, 2}));
  EXPECT_EQ(R(3, -6), (Rational{-1, 2}));
  EXPECT_EQ(R(0, 5), (Rational{0, 1}));
  EXPECT_THROW(Rational::Make(1, 0), Error);
  EXPECT_EQ(FormatRational(R(5)), "5");
  EXPECT_EQ(FormatRational(R(-2)), "-2");
  EXPECT_EQ(FormatRational(R(10, 6)), "5/3");
  EXPECT_TRUE(R(1, 3) < R(1, 2));
  EXPECT_TRUE(R(-1, 2) < R(0));
  EXPECT_FALSE(R(2, 4) < R(1, 2));
  EXPECT_TRUE(R(4).is_natural());
  EXPECT_FALSE(R(-4).is_natural());
  EXPECT_FALSE(R(1, 4).is_natural());

  EXPECT_EQ(ApplyRational(R(1, 2), '+', R(1, 3)), R(5, 6));
  EXPECT_EQ(ApplyRational(R(1, 2), '-', R(3, 4)), R(-1, 4));
  EXPECT_EQ(ApplyRational(R(2, 3), '*', R(9, 4)), R(3, 2));
  EXPECT_EQ(ApplyRational(R(6), '/', R(1, 4)), R(24));
  EXPECT_EQ(ApplyRational(R(5), '/', R(0)), std::nullopt);
  EXPECT_EQ(ApplyRational(R(5), '%', R(2)), std::nullopt);
  // Overflow is reported, not wrapped: (2^62)^2 does not fit, and neither does 1/x of a huge
  // denominator sum.
  const Rational big{int64_t{1} << 62, 1};
  EXPECT_EQ(ApplyRational(big, '*', big), std::nullopt);
  EXPECT_EQ(ApplyRational(big, '+', big), std::nullopt);
  EXPECT_EQ(ApplyRational(big, '-', big), R(0));
  // Comparison does not overflow either.
  EXPECT_TRUE((Rational{1, int64_t{1} << 62}) < (Rational{1, (int64_t{1} << 62) - 1}));
}

TEST(Game24Test, EvaluateKnownHands) {
  const Game24Value solvable = EvaluateGame24(std::vector<int>{4, 9, 10, 13});
  EXPECT_EQ(solvable.label, Game24Label::kSure);
  ASSERT_EQ(solvable.solution.size(), 3u);
  EXPECT_EQ(solvable.solution.back().left, Numbers({24}));

  const Game24Value impossible = EvaluateGame24(std::vector<int>{1, 1, 1, 1});
  EXPECT_EQ(impossible.label, Game24Label::kImpossible);
  EXPECT_TRUE(impossible.solution.empty());

  // 5 * (5 - 1/5) = 24 goes through a fraction: likely, not sure.
  const Game24Value likely = EvaluateGame24(std::vector<int>{1, 5, 5, 5});
  EXPECT_EQ(likely.label, Game24Label::kLikely);
  ASSERT_EQ(likely.solution.size(), 3u);
  EXPECT_EQ(likely.solution.back().left, Numbers({24}));
  bool fraction = false;
  for (const Game24Step& step : likely.solution) fraction |= !step.result.is_natural();
  EXPECT_TRUE(fraction);
  // The solver's own solution is consistent step by step and passes the checker.
  std::vector<Rational> state = Numbers({1, 5, 5, 5});
  for (const Game24Step& step : likely.solution) {
    EXPECT_TRUE(Game24StepConsistent(state, step)) << FormatGame24Step(step);
    state = step.left;
  }
  const std::string expression = Game24Expression(std::vector<int>{1, 5, 5, 5}, likely.solution);
  EXPECT_TRUE(Game24CheckAnswer(std::vector<int>{1, 5, 5, 5}, expression)) << expression;

  EXPECT_EQ(Game24LabelName(Game24Label::kSure), "sure");
  EXPECT_EQ(Game24LabelName(Game24Label::kLikely), "likely");
  EXPECT_EQ(Game24LabelName(Game24Label::kImpossible), "impossible");
}

TEST(Game24Test, NaturalStepsAreConsistentAndDistinct) {
  const std::vector<Rational> state = Numbers({4, 4, 6});
  const std::vector<Game24Step> steps = Game24NaturalSteps(state);
  std::set<std::string> lines;
  for (const Game24Step& step : steps) {
    EXPECT_TRUE(Game24StepConsistent(state, step)) << FormatGame24Step(step);
    EXPECT_TRUE(step.result.is_natural());
    EXPECT_TRUE(lines.insert(FormatGame24Step(step)).second) << FormatGame24Step(step);
  }
  EXPECT_TRUE(lines.count("4 + 4 = 8 (left: 6 8)"));
  EXPECT_TRUE(lines.count("6 - 4 = 2 (left: 2 4)"));
  EXPECT_TRUE(lines.count("4 / 4 = 1 (left: 1 6)"));
  EXPECT_FALSE(lines.count("4 - 6 = -2 (left: -2 4)"));  // not natural
}

TEST(Game24Test, PromptsAreTheCorpusFormats) {
  EXPECT_EQ(Game24ProposePrompt(Numbers({13, 4, 10, 9})),
            "Input: 4 9 10 13\nPossible next steps:\n");
  EXPECT_EQ(Game24ValuePrompt(Numbers({13, 4, 10, 9})), "Value: 4 9 10 13\n");
  EXPECT_EQ(Game24ValuePrompt(std::vector<Rational>{R(6), R(3, 4), R(1)}), "Value: 3/4 1 6\n");
  EXPECT_EQ(Game24DirectPrompt(std::vector<int>{13, 4, 10, 9}), "Value: 4 9 10 13\n");
  // The corpus documents start with these prompts.
  auto first_line_numbers = [](const std::string& doc, std::size_t skip) {
    std::istringstream in(doc.substr(skip, doc.find('\n') - skip));
    std::vector<Rational> numbers;
    for (int x; in >> x;) numbers.push_back(R(x));
    return numbers;
  };
  for (uint64_t i = 0; i < 50; ++i) {
    CorpusRng propose_rng(3, i), value_rng(3, i);
    const std::string propose = GenerateGame24Propose(propose_rng);
    const std::string value = GenerateGame24Value(value_rng);
    EXPECT_TRUE(propose.starts_with(Game24ProposePrompt(first_line_numbers(propose, 7))))
        << propose;
    EXPECT_TRUE(value.starts_with(Game24ValuePrompt(first_line_numbers(value, 7)))) << value;
  }
}

TEST(Game24Test, ParsesStepLinesAsTheSolverWritesThem) {
  const std::string lines[] = {"13 - 9 = 4 (left: 4 4 10)", "6 / (1/4) = 24 (left: 24)",
                               "1 - (3/4) = 1/4 (left: 1/4 6)", "(-2) * (-12) = 24 (left: 24)",
                               "3 - 5 = -2 (left: -2 4)"};
  for (const std::string& line : lines) {
    const std::optional<Game24Step> step = ParseGame24StepLine(line);
    ASSERT_TRUE(step.has_value()) << line;
    EXPECT_EQ(FormatGame24Step(*step), line);  // round trip
  }
  const Game24Step step = *ParseGame24StepLine("6 / (1/4) = 24 (left: 24)");
  EXPECT_EQ(step.a, R(6));
  EXPECT_EQ(step.op, '/');
  EXPECT_EQ(step.b, R(1, 4));
  EXPECT_EQ(step.result, R(24));
  EXPECT_EQ(step.left, Numbers({24}));
  // Extra spaces and a carriage return are tolerated.
  EXPECT_TRUE(ParseGame24StepLine("  4  +  5 = 9 (left:  6 9 10 )\r").has_value());
  // Every solver step round-trips through the parser.
  for (const Game24Step& s : Game24NaturalSteps(Numbers({2, 3, 7, 12}))) {
    const std::optional<Game24Step> back = ParseGame24StepLine(FormatGame24Step(s));
    ASSERT_TRUE(back.has_value()) << FormatGame24Step(s);
    EXPECT_EQ(FormatGame24Step(*back), FormatGame24Step(s));
  }
}

TEST(Game24Test, SkipsMalformedLinesAndNeverThrowsOnGarbage) {
  const std::string bad[] = {
      "",
      "sure",
      "Input: 4 9 10 13",
      "4 + 5 = 9",                        // no left
      "4 + 5 = 9 (left: )",               // nothing left
      "4 + 5 = 9 (left: 6 9 10",          // unclosed
      "4 + 5 = 9 (left: 6 9 10) extra",   // trailing text
      "4 ^ 5 = 9 (left: 6 9 10)",         // unknown operator
      "4+5 = 9 (left: 6 9 10)",           // operator not spaced
      "1/4 + 5 = 21/4 (left: 21/4)",      // fraction operand without parentheses
      "6 / (1/0) = 24 (left: 24)",        // zero denominator
      "6 / (1/ 4) = 24 (left: 24)",       // broken fraction
      "4 + 5 = 9/0 (left: 9)",            // zero denominator in the result
      "(4 + 5 = 9 (left: 9)",             // unbalanced
      "9999999999999 + 1 = 1 (left: 1)",  // 13 digits
      "4 + 5 = 9 (left:6 9 10)",          // number glued to the colon
      "-4 + 5 = 1 (left: 1)",             // bare negative operand
      "4 + 5 = 9 (left: 6 9 x)",          // not a number
      "\xff\xfe garbage \x01\x02 = (left: ((",
  };
  for (const std::string& line : bad) {
    EXPECT_FALSE(ParseGame24StepLine(line).has_value()) << line;
  }
  // Whole texts: good lines are kept, bad ones skipped.
  const std::string text =
      "4 + 5 = 9 (left: 6 9 10)\n"
      "blah blah\n"
      "10 - 4 = 6 (left: 5 6 6\n"
      "(left: 3\n"
      "10 - 6 = 4 (left: 4 4 5)\n";
  const std::vector<Game24Step> steps = ParseGame24Steps(text);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(FormatGame24Step(steps[0]), "4 + 5 = 9 (left: 6 9 10)");
  EXPECT_EQ(FormatGame24Step(steps[1]), "10 - 6 = 4 (left: 4 4 5)");
  // A pseudo-random byte soup is survived.
  CorpusRng rng(1, 2);
  for (int i = 0; i < 2000; ++i) {
    std::string soup;
    const char alphabet[] = "0123456789 ()/+-*=left:\n\r-sureimpossible";
    const int length = rng.Range(0, 60);
    for (int k = 0; k < length; ++k) soup += alphabet[rng.Below(sizeof(alphabet) - 1)];
    EXPECT_NO_THROW(ParseGame24Steps(soup));
    EXPECT_NO_THROW(ParseGame24Label(soup));
    EXPECT_NO_THROW(Game24CheckAnswer(std::vector<int>{4, 9, 10, 13}, soup));
    EXPECT_NO_THROW(Game24DirectAnswer(std::vector<int>{4, 9, 10, 13}, soup));
  }
}

TEST(Game24Test, ReadsTheFirstDocumentOnly) {
  // What follows an empty line is a new document the model went on to write.
  const std::string text =
      "4 + 5 = 9 (left: 6 9 10)\n"
      "\n"
      "Input: 1 2 3 4\n"
      "1 + 2 = 3 (left: 3 3 4)\n";
  EXPECT_EQ(ParseGame24Steps(text).size(), 1u);
  EXPECT_EQ(ParseGame24Steps("\n\n4 + 5 = 9 (left: 6 9 10)\n").size(), 1u);  // leading blanks
  EXPECT_EQ(Game24DocumentLines("a\r\nb\n  \nc\n"), (std::vector<std::string_view>{"a", "b"}));

  EXPECT_EQ(ParseGame24Label("10 - 4 = 6 (left: 4 6)\n4 * 6 = 24 (left: 24)\nsure\n"),
            Game24Label::kSure);
  EXPECT_EQ(ParseGame24Label("likely"), Game24Label::kLikely);
  EXPECT_EQ(ParseGame24Label("impossible\n"), Game24Label::kImpossible);
  EXPECT_EQ(ParseGame24Label("sure  \r\n\n"), Game24Label::kSure);
  EXPECT_EQ(ParseGame24Label("impossible\n\nValue: 1 2\nsure\n"), Game24Label::kImpossible);
  EXPECT_EQ(ParseGame24Label("sure\n4 + 5 = 9 (left: 6 9 10)\n"), std::nullopt);  // not last
  EXPECT_EQ(ParseGame24Label("4 * 6 = 24 (left: 24)\nsur"), std::nullopt);        // cut short
  EXPECT_EQ(ParseGame24Label("Sure"), std::nullopt);
  EXPECT_EQ(ParseGame24Label("unsure"), std::nullopt);
  EXPECT_EQ(ParseGame24Label(""), std::nullopt);
  EXPECT_EQ(ParseGame24Label("\n\n"), std::nullopt);
}

TEST(Game24Test, StepConsistency) {
  const std::vector<Rational> state = Numbers({4, 9, 10, 13});
  EXPECT_TRUE(Game24StepConsistent(state, Step("13 - 9 = 4 (left: 4 4 10)")));
  EXPECT_TRUE(Game24StepConsistent(state, Step("9 - 13 = -4 (left: -4 4 10)")));
  EXPECT_TRUE(Game24StepConsistent(state, Step("4 / 10 = 2/5 (left: 2/5 9 13)")));
  // The state may come in any order.
  EXPECT_TRUE(Game24StepConsistent(Numbers({13, 10, 9, 4}), Step("13 - 9 = 4 (left: 4 4 10)")));
  EXPECT_FALSE(Game24StepConsistent(state, Step("13 - 9 = 5 (left: 4 5 10)")));  // wrong result
  EXPECT_FALSE(Game24StepConsistent(state, Step("13 - 9 = 4 (left: 4 10)")));    // lost a number
  EXPECT_FALSE(Game24StepConsistent(state, Step("13 - 9 = 4 (left: 4 4 10 13)")));
  EXPECT_FALSE(Game24StepConsistent(state, Step("13 - 9 = 4 (left: 4 10 4)")));    // not sorted
  EXPECT_FALSE(Game24StepConsistent(state, Step("13 - 9 = 4 (left: 4 4 11)")));    // wrong rest
  EXPECT_FALSE(Game24StepConsistent(state, Step("13 - 8 = 5 (left: 4 5 10)")));    // 8 not there
  EXPECT_FALSE(Game24StepConsistent(state, Step("4 + 4 = 8 (left: 8 9 10 13)")));  // one 4 only
  EXPECT_TRUE(Game24StepConsistent(Numbers({4, 4, 6}), Step("4 + 4 = 8 (left: 6 8)")));
  EXPECT_FALSE(Game24StepConsistent(Numbers({4, 6}), Step("4 / 0 = 0 (left: 0 6)")));
  // Fraction operands, as in "likely" play.
  EXPECT_TRUE(Game24StepConsistent(std::vector<Rational>{R(1, 4), R(6)},
                                   Step("6 / (1/4) = 24 (left: 24)")));
  EXPECT_FALSE(Game24StepConsistent(std::vector<Rational>{R(1, 4), R(6)},
                                    Step("6 / (1/4) = 3/2 (left: 3/2)")));
}

TEST(Game24Test, TakingAStepAsWrittenOrExactly) {
  const std::vector<Rational> state = Numbers({4, 9, 10, 13});
  const Game24Step right = Step("13 - 9 = 4 (left: 4 4 10)");
  const Game24Step wrong_result = Step("13 - 9 = 5 (left: 4 5 10)");
  const Game24Step missing = Step("4 + 4 = 8 (left: 8 9 10 13)");
  for (Game24Arithmetic arithmetic : {Game24Arithmetic::kAsWritten, Game24Arithmetic::kExact}) {
    const std::optional<Game24Step> taken = Game24TakeStep(state, right, arithmetic);
    ASSERT_TRUE(taken.has_value());
    EXPECT_EQ(FormatGame24Step(*taken), "13 - 9 = 4 (left: 4 4 10)");
    EXPECT_FALSE(Game24TakeStep(state, missing, arithmetic).has_value());  // one 4 only
  }
  EXPECT_FALSE(Game24TakeStep(state, wrong_result, Game24Arithmetic::kAsWritten).has_value());
  const std::optional<Game24Step> redone =
      Game24TakeStep(state, wrong_result, Game24Arithmetic::kExact);
  ASSERT_TRUE(redone.has_value());
  EXPECT_EQ(FormatGame24Step(*redone), "13 - 9 = 4 (left: 4 4 10)");
  EXPECT_FALSE(Game24TakeStep(Numbers({0, 6}), Step("6 / 0 = 0 (left: 0 0)"),
                              Game24Arithmetic::kExact)
                   .has_value());  // division by zero
  // Direct answering reads the model's steps the same way.
  const std::string text =
      "13 - 9 = 5 (left: 4 5 10)\n10 - 4 = 6 (left: 4 6)\n4 * 6 = 24 (left: 24)\nsure\n";
  EXPECT_EQ(Game24DirectAnswer(std::vector<int>{4, 9, 10, 13}, text, Game24Arithmetic::kAsWritten),
            "");
  EXPECT_EQ(Game24DirectAnswer(std::vector<int>{4, 9, 10, 13}, text, Game24Arithmetic::kExact),
            "(13 - 9) * (10 - 4) = 24");
}

TEST(Game24Test, ExpressionsFromStepsAndTheirCheck) {
  const std::vector<int> puzzle = {4, 9, 10, 13};
  const std::vector<Game24Step> steps = {Step("13 - 9 = 4 (left: 4 4 10)"),
                                         Step("10 - 4 = 6 (left: 4 6)"),
                                         Step("4 * 6 = 24 (left: 24)")};
  const std::string expression = Game24Expression(puzzle, steps);
  EXPECT_EQ(expression, "(13 - 9) * (10 - 4) = 24");
  EXPECT_TRUE(Game24CheckAnswer(puzzle, expression));
  EXPECT_TRUE(Game24CheckAnswer(puzzle, "(13 - 9) * (10 - 4)"));
  EXPECT_TRUE(Game24CheckAnswer(std::vector<int>{13, 10, 9, 4}, "(10-4)*(13-9)=24"));
  EXPECT_TRUE(Game24CheckAnswer(std::vector<int>{1, 5, 5, 5}, "5 * (5 - 1 / 5) = 24"));
  EXPECT_TRUE(Game24CheckAnswer(std::vector<int>{3, 3, 8, 8}, "8 / (3 - 8 / 3)"));
  // Steps that do not chain, or stop short of one number, build nothing.
  EXPECT_EQ(Game24Expression(puzzle, std::vector<Game24Step>{steps[1]}), "");
  EXPECT_EQ(Game24Expression(puzzle, std::vector<Game24Step>{steps[0], steps[1]}), "");
  EXPECT_EQ(Game24Expression(puzzle, std::vector<Game24Step>{}), "");
  // A path that ends elsewhere than 24 is written with its value and fails the check.
  const std::string wrong = Game24Expression(
      std::vector<int>{1, 2, 3, 4},
      std::vector<Game24Step>{Step("1 + 2 = 3 (left: 3 3 4)"), Step("3 + 3 = 6 (left: 4 6)"),
                              Step("4 + 6 = 10 (left: 10)")});
  EXPECT_EQ(wrong, "4 + (3 + (1 + 2)) = 10");  // equal values: the earliest number first
  EXPECT_FALSE(Game24CheckAnswer(std::vector<int>{1, 2, 3, 4}, wrong));

  EXPECT_FALSE(Game24CheckAnswer(puzzle, "(13 - 9) * (10 - 3) = 24"));  // wrong number
  EXPECT_FALSE(Game24CheckAnswer(puzzle, "(13 - 9) * 6 = 24"));         // 6 is not given
  EXPECT_FALSE(Game24CheckAnswer(puzzle, "(13 - 9) * (10 - 4) * 1"));   // extra number
  EXPECT_FALSE(Game24CheckAnswer(puzzle, "13 + 9 + 10 - 4 = 24"));      // equals 28
  EXPECT_FALSE(Game24CheckAnswer(puzzle, "(13 - 9) * (10 - 4) = 25"));  // wrong right side
  EXPECT_FALSE(Game24CheckAnswer(puzzle, "(13 - 9) * (10 - 4) = 24 = 24"));
  EXPECT_FALSE(Game24CheckAnswer(puzzle, "(13 - 9) * (10 - 4) ="));
  EXPECT_FALSE(Game24CheckAnswer(std::vector<int>{1, 5, 5, 5}, "5 * (5 - 1 / 0) = 24"));  // 1/0
  EXPECT_FALSE(Game24CheckAnswer(std::vector<int>{2, 2, 6, 6}, "(6 + 6) * 2 / (2 - 2)"));
  // The numbers are a multiset: as a set, {3, 8} and {3, 3, 3, 8} would pass for {3, 3, 8, 8}.
  EXPECT_FALSE(Game24CheckAnswer(std::vector<int>{3, 3, 8, 8}, "3 * 8"));
  EXPECT_FALSE(Game24CheckAnswer(std::vector<int>{3, 3, 8, 8}, "3 * 8 * 3 / 3"));
  EXPECT_FALSE(Game24CheckAnswer(puzzle, "(13 - 9) * (10 - 4"));  // unbalanced
  EXPECT_FALSE(Game24CheckAnswer(puzzle, "(13 - 9) * (10 - 4))"));
  EXPECT_FALSE(Game24CheckAnswer(puzzle, "-(9 - 13) * (10 - 4)"));  // no unary minus
  EXPECT_FALSE(Game24CheckAnswer(puzzle, "(13 - 9) x (10 - 4)"));
  EXPECT_FALSE(Game24CheckAnswer(puzzle, ""));
  EXPECT_FALSE(Game24CheckAnswer(puzzle, "24"));
  EXPECT_FALSE(Game24CheckAnswer(std::vector<int>{24}, "24000000000000000000000000"));
  EXPECT_FALSE(Game24CheckAnswer(puzzle, std::string(100000, '(')));  // deep nesting
  EXPECT_FALSE(Game24CheckAnswer(puzzle, "\xe2\x88\x92 \x01 garbage"));
  EXPECT_TRUE(Game24CheckAnswer(std::vector<int>{24}, "((((24))))"));
}

TEST(Game24Test, DirectAnswerUsesTheConsistentStepsBeforeTheLabel) {
  const std::vector<int> puzzle = {4, 9, 10, 13};
  EXPECT_EQ(Game24DirectAnswer(puzzle,
                               "13 - 9 = 4 (left: 4 4 10)\n10 - 4 = 6 (left: 4 6)\n"
                               "4 * 6 = 24 (left: 24)\nsure\n"),
            "(13 - 9) * (10 - 4) = 24");
  // A wrong step is skipped as if not written; the rest still chain.
  EXPECT_EQ(Game24DirectAnswer(puzzle,
                               "13 - 9 = 5 (left: 4 5 10)\n13 - 9 = 4 (left: 4 4 10)\n"
                               "10 - 4 = 6 (left: 4 6)\n4 * 6 = 24 (left: 24)\nsure\n"),
            "(13 - 9) * (10 - 4) = 24");
  // Steps after the label do not count.
  EXPECT_EQ(Game24DirectAnswer(puzzle,
                               "13 - 9 = 4 (left: 4 4 10)\nsure\n10 - 4 = 6 (left: 4 6)\n"
                               "4 * 6 = 24 (left: 24)\n"),
            "");
  EXPECT_EQ(Game24DirectAnswer(puzzle, "impossible\n"), "");
  EXPECT_EQ(Game24DirectAnswer(puzzle, "13 - 9 = 4 (left: 4 4 10)\n"), "");  // not at 24
  EXPECT_EQ(Game24DirectAnswer(puzzle, ""), "");
  // The solver's value document for a hand is a direct answer that checks.
  for (const std::vector<int>& hand :
       {std::vector<int>{4, 9, 10, 13}, {1, 5, 5, 5}, {3, 3, 8, 8}}) {
    std::string text;
    const Game24Value value = EvaluateGame24(hand);
    for (const Game24Step& step : value.solution) text += FormatGame24Step(step) + "\n";
    text += std::string(Game24LabelName(value.label)) + "\n";
    const std::string answer = Game24DirectAnswer(hand, text);
    EXPECT_TRUE(Game24CheckAnswer(hand, answer)) << text << answer;
  }
}

TEST(Game24Test, ParsesPuzzles) {
  EXPECT_EQ(ParseGame24Puzzle("4 9 10 13"), (Game24Puzzle{4, 9, 10, 13}));
  EXPECT_EQ(ParseGame24Puzzle("13,4, 10 ,9"), (Game24Puzzle{4, 9, 10, 13}));
  EXPECT_EQ(ParseGame24Puzzle("  1 1 1 1\n"), (Game24Puzzle{1, 1, 1, 1}));
  auto error_of = [](const std::string& text) -> std::string {
    try {
      ParseGame24Puzzle(text);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_of("4 9 10").find("has 3 numbers; expected 4"), std::string::npos)
      << error_of("4 9 10");
  EXPECT_NE(error_of("4 9 10 13 2").find("has 5 numbers"), std::string::npos);
  EXPECT_NE(error_of("").find("has 0 numbers"), std::string::npos);
  EXPECT_NE(error_of("4 9 ten 13").find("'ten' is not a whole number"), std::string::npos);
  EXPECT_NE(error_of("4 9 -1 13").find("'-1' is not a whole number"), std::string::npos);
  EXPECT_NE(error_of("4 9 2.5 13").find("not a whole number"), std::string::npos);
  EXPECT_NE(error_of("4 9 14 13").find("14 is out of range (numbers are 1 to 13"),
            std::string::npos);
  EXPECT_NE(error_of("0 9 10 13").find("0 is out of range"), std::string::npos);
  EXPECT_NE(error_of("4 9 99999999999999999999 13").find("out of range"), std::string::npos);
  EXPECT_NE(error_of("4 9 10 13 x").find("'4 9 10 13 x'"), std::string::npos);  // names the text
}

TEST(Game24Test, DrawsDistinctSolvablePuzzlesDeterministically) {
  const std::vector<Game24Puzzle> a = Game24Puzzles(kGame24HeldOutSeed, 100);
  const std::vector<Game24Puzzle> b = Game24Puzzles(kGame24HeldOutSeed, 100);
  const std::vector<Game24Puzzle> c = Game24Puzzles(kGame24HeldOutSeed + 1, 100);
  ASSERT_EQ(a.size(), 100u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const std::vector<Game24Puzzle> shorter = Game24Puzzles(kGame24HeldOutSeed, 10);
  EXPECT_TRUE(std::equal(shorter.begin(), shorter.end(), a.begin()));
  std::set<Game24Puzzle> distinct(a.begin(), a.end());
  EXPECT_EQ(distinct.size(), a.size());
  for (const Game24Puzzle& p : a) {
    EXPECT_TRUE(std::is_sorted(p.begin(), p.end()));
    EXPECT_GE(p.front(), 1);
    EXPECT_LE(p.back(), 13);
    EXPECT_NE(EvaluateGame24(p).label, Game24Label::kImpossible);
  }
  EXPECT_TRUE(Game24Puzzles(1, 0).empty());
  // Every solvable hand can be drawn, and no more.
  const std::vector<Game24Puzzle> all = Game24Puzzles(5, kGame24SolvableHands);
  EXPECT_EQ(std::set<Game24Puzzle>(all.begin(), all.end()).size(),
            static_cast<std::size_t>(kGame24SolvableHands));
  EXPECT_THROW(Game24Puzzles(1, kGame24SolvableHands + 1), Error);
  EXPECT_THROW(Game24Puzzles(1, -1), Error);
}

}  // namespace
}  // namespace grove
