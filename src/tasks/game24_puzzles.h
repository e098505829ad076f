// Game-of-24 puzzles: four numbers from 1 to 13, the range of the 4nums.com set that
// tree-of-thoughts uses and of the training corpus's starting hands (docs/corpus.md). There are
// 1,820 distinct hands, 1,362 of them solvable.
//
// Held-out puzzles: the bundled models were trained on the corpus of seed 1 (models/README.md), and
// puzzles for evaluation are drawn here with another seed (kGame24HeldOutSeed, 24) through a stream
// of their own. That keeps the draws apart from the training documents, but not the hands: there
// are only 1,820 of them, so a drawn puzzle may coincide with a hand seen in training, by chance.
// In fact most do: the train part of that corpus (--tokens 6000000) holds 1,603 distinct hands in
// its four-number propose and value documents (1,209 of the 1,362 solvable ones), and 95 of the
// first 100 puzzles of seed 24 are among them (though the models trained on part of an epoch, and
// a hand may have come with its next steps, with one solution, or with its label only). "Held out"
// means drawn independently, not unseen.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace grove {

// Four numbers, ascending.
using Game24Puzzle = std::array<int, 4>;

inline constexpr int kGame24MinNumber = 1;
inline constexpr int kGame24MaxNumber = 13;
inline constexpr int kGame24SolvableHands = 1362;
inline constexpr uint64_t kGame24HeldOutSeed = 24;

// "4 9 10 13" or "4, 9, 10, 13" (white space and commas separate) -> {4, 9, 10, 13}, sorted.
// Throws grove::Error naming the text when there are not exactly four numbers, when one is not a
// decimal integer, or when one is outside 1..13.
Game24Puzzle ParseGame24Puzzle(std::string_view text);

// `count` distinct solvable puzzles (label sure or likely), drawn deterministically from `seed`:
// each draw is four numbers uniform in 1..13, sorted, as the corpus draws its hands (so hands with
// repeated numbers are rarer than with distinct ones); impossible and already drawn hands are
// drawn again. A longer list of the same seed starts with the shorter one. 0 <= count <= 1,362,
// else grove::Error.
std::vector<Game24Puzzle> Game24Puzzles(uint64_t seed, int count);

}  // namespace grove
