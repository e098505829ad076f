// The two tree-of-thoughts prompt formats of the Game of 24, exactly as the training corpus writes
// them (docs/corpus.md), and the reading of a model's continuation back into steps and labels.
//
//   propose prompt            continuation              value prompt     continuation
//   Input: 4 9 10 13          13 - 9 = 4 (left: 4 4 10)  Value: 4 4 10   10 - 4 = 6 (left: 4 6)
//   Possible next steps:      10 - 4 = 6 (left: 4 9 13)                  4 * 6 = 24 (left: 24)
//                             ...                                        sure
//
// Continuations are model output: the parsers skip what they cannot read and never throw. They
// read the first document of the continuation only: the corpus separates documents by one empty
// line (and the trainer by <|endoftext|>), so what follows an empty line is a new document the
// model went on to write, not part of its answer.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tasks/game24.h"

namespace grove {

// "Input: 4 9 10 13\nPossible next steps:\n" and "Value: 4 9 10 13\n"; the numbers are written in
// ascending order whatever their order here, as the corpus writes them.
std::string Game24ProposePrompt(std::span<const Rational> numbers);
std::string Game24ValuePrompt(std::span<const Rational> numbers);

// The lines of the first document of `text`: split at '\n' (a trailing '\r' dropped), leading empty
// lines skipped, ending before the next empty line (a line of white space only counts as empty).
std::vector<std::string_view> Game24DocumentLines(std::string_view text);

// One step line "a op b = r (left: x y z)" as FormatGame24Step writes it: operands are natural
// numbers or parenthesised rationals ("(3/4)", "(-2)"), the result and the numbers left are bare
// rationals. Runs of spaces are accepted where the format has one space. nullopt for anything
// else, including a zero denominator and integers of more than 12 digits. The arithmetic is not
// checked here (see Game24StepConsistent).
std::optional<Game24Step> ParseGame24StepLine(std::string_view line);

// The well-formed step lines of the first document of `text`, in order; other lines are skipped.
std::vector<Game24Step> ParseGame24Steps(std::string_view text);

// The label that ends the first document of `text`: its last line, trimmed, being "sure",
// "likely" or "impossible"; nullopt otherwise (no label, or the generation stopped before it).
std::optional<Game24Label> ParseGame24Label(std::string_view text);

}  // namespace grove
