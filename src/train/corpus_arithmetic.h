// Arithmetic word problems with step-by-step worked solutions. Format (docs/corpus.md):
//
//   Problem: Mira has 12 apples. She buys 7 more apples and then gives 5 apples to Tobin. How many
//   apples does Mira have now?
//   Solution:
//   Mira starts with 12 apples.
//   After buying 7 more, she has 12 + 7 = 19 apples.
//   After giving 5 away, she has 19 - 5 = 14 apples.
//   Answer: 14
//
// Every computed step is written "x op y = z" with op in + - * / on non-negative integers (division
// is exact), and the answer line repeats the result of the last step; all of it computed, so
// correct.
#pragma once

#include <string>

#include "tasks/corpus_rng.h"

namespace grove {

std::string GenerateArithmeticProblem(CorpusRng& rng);

}  // namespace grove
