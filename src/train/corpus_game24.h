// Game of 24 in the two prompt formats of tree-of-thoughts (Yao et al. 2023), with every answer
// computed by exact search over rationals (docs/corpus.md):
//
//   propose                              value
//   Input: 4 5 6 10                      Value: 4 4 10
//   Possible next steps:                 10 - 4 = 6 (left: 4 6)
//   4 + 5 = 9 (left: 6 9 10)             4 * 6 = 24 (left: 24)
//   10 - 4 = 6 (left: 5 6 6)             sure
//   ...
//
// Value labels: "sure" when 24 can be reached with every intermediate result a non-negative integer
// (the steps people write), "likely" when it can be reached only through a fraction or a negative
// number (so a solver that stays in the naturals would miss it), "impossible" when no combination
// reaches 24. For sure and likely the lines before the label are one solution.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "train/corpus_rng.h"

namespace grove {

// An exact rational, always normalised (den > 0, gcd(num, den) == 1).
struct Rational {
  int64_t num = 0;
  int64_t den = 1;

  static Rational Make(int64_t num, int64_t den);
  bool is_natural() const { return den == 1 && num >= 0; }
  friend bool operator==(const Rational&, const Rational&) = default;
  friend bool operator<(const Rational& a, const Rational& b) {
    return a.num * b.den < b.num * a.den;
  }
};
std::string FormatRational(const Rational& r);  // "5", "-2", "5/3"

enum class Game24Label { kSure, kLikely, kImpossible };
std::string_view Game24LabelName(Game24Label label);

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

struct Game24Value {
  Game24Label label = Game24Label::kImpossible;
  std::vector<Game24Step> solution;  // empty when impossible
};
// Exact search over every order of combining the numbers with + - * /.
Game24Value EvaluateGame24(std::span<const int> numbers);

// Every legal first step that keeps the numbers natural (a - b with a >= b, a / b when exact), each
// once (duplicate numbers give duplicate steps otherwise).
std::vector<Game24Step> Game24NaturalSteps(std::span<const Rational> numbers);

std::string GenerateGame24Propose(CorpusRng& rng);
std::string GenerateGame24Value(CorpusRng& rng);

}  // namespace grove
