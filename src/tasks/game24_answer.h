// Answers to the Game of 24: an expression such as "(13 - 9) * (10 - 4) = 24" built from a path of
// steps, the independent check of such an expression, and direct answering (the value prompt,
// whose continuation shows a solution before its label, used without any search).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "tasks/game24.h"

namespace grove {

// Replays `steps` from the numbers of `puzzle` and writes the expression they build, with every
// compound operand in parentheses: the steps "13 - 9 = 4 (left: 4 4 10)", "10 - 4 = 6 (left: 4 6)",
// "4 * 6 = 24 (left: 24)" from 4 9 10 13 give "(13 - 9) * (10 - 4) = 24". Empty when a step is not
// consistent with the numbers it is taken from (Game24StepConsistent) or when more than one number
// is left at the end. The value after "=" is the last number, whatever it is.
std::string Game24Expression(std::span<const int> puzzle, std::span<const Game24Step> steps);

// Whether `expression` solves `puzzle`, checked on its own terms (nothing here trusts the steps it
// may have come from): integers, + - * /, parentheses and spaces, optionally followed by "= 24". It
// must use exactly the puzzle's numbers (as a multiset: each once, none added) and equal 24 in
// exact rational arithmetic. Anything else is false, never an exception: text that does not parse,
// division by zero, nesting deeper than 64 parentheses, integers of more than 9 digits.
bool Game24CheckAnswer(std::span<const int> puzzle, std::string_view expression);

// Direct answering: the prompt is the value prompt of the puzzle ("Value: 4 9 10 13\n"), whose
// continuation in the corpus is one solution then a label. The answer is the expression built from
// the steps written before the label that are consistent with the numbers reached so far (an
// inconsistent step is skipped, as if not written); empty when they do not end at 24.
std::string Game24DirectPrompt(std::span<const int> puzzle);
std::string Game24DirectAnswer(std::span<const int> puzzle, std::string_view generated_text,
                               Game24Arithmetic arithmetic = Game24Arithmetic::kAsWritten);

}  // namespace grove
