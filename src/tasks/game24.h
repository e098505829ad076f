// The Game of 24: combine four numbers with + - * / into 24, each number used once. This file holds
// the rules and an exact solver; the prompts and the reading of model text are in
// tasks/game24_prompts.h, answers in tasks/game24_answer.h, puzzles in tasks/game24_puzzles.h.
//
// Play goes by steps, as in tree-of-thoughts (Yao et al. 2023): a step combines two of the numbers
// and lists what is left, "13 - 9 = 4 (left: 4 4 10)". Value labels (the value prompt's answer):
// "sure" when 24 can be reached with every intermediate result a non-negative integer (the steps
// people write), "likely" when it can be reached only through a fraction or a negative number (so a
// solver that stays in the naturals would miss it), "impossible" when no combination reaches 24.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tasks/rational.h"

namespace grove {

enum class Game24Label { kSure, kLikely, kImpossible };
std::string_view Game24LabelName(Game24Label label);
// The label named exactly `name` ("sure", "likely", "impossible"), or nothing.
std::optional<Game24Label> Game24LabelNamed(std::string_view name);

// One step "a op b = result (left: ...)"; `left` is sorted ascending and includes the result.
// Formatted operands that are not natural numbers are parenthesised: "6 / (1/4) = 24 (left: 24)".
struct Game24Step {
  Rational a;
  char op = '+';
  Rational b;
  Rational result;
  std::vector<Rational> left;
};
std::string FormatGame24Step(const Game24Step& step);

// Numbers as the prompts and steps write them: space-separated, in the given order ("3/4 1 6").
std::string FormatGame24Numbers(std::span<const Rational> numbers);

struct Game24Value {
  Game24Label label = Game24Label::kImpossible;
  std::vector<Game24Step> solution;  // empty when impossible
};
// Exact search over every order of combining the numbers with + - * /.
Game24Value EvaluateGame24(std::span<const int> numbers);

// Every legal first step that keeps the numbers natural (a - b with a >= b, a / b when exact), each
// once (duplicate numbers give duplicate steps otherwise).
std::vector<Game24Step> Game24NaturalSteps(std::span<const Rational> numbers);

// Whether `step` can be taken from `state` (a multiset of numbers, in any order): a and b are two
// of the numbers (one each, so "4 + 4" needs two 4s), result is exactly a op b, and left is the
// state without a and b, plus the result, sorted ascending. Any rational is allowed, as in "likely"
// play.
bool Game24StepConsistent(std::span<const Rational> state, const Game24Step& step);

// How the model's steps are read. kAsWritten keeps a step only when it is consistent (above).
// kExact keeps the model's choice of two numbers and an operation when the numbers are in the
// state, and computes the result and what is left exactly: the language model chooses, arithmetic
// is the environment's (the bundled 12 M-parameter target often writes "13 - 4 = 8"; a model of
// ToT's size rarely does). The answer is checked on its own either way (Game24CheckAnswer).
enum class Game24Arithmetic { kAsWritten, kExact };
// The step as `arithmetic` reads it from `state`, or nullopt when it cannot be taken.
std::optional<Game24Step> Game24TakeStep(std::span<const Rational> state, const Game24Step& step,
                                         Game24Arithmetic arithmetic);

}  // namespace grove
