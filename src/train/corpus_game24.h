// Game of 24 documents in the two prompt formats of tree-of-thoughts (Yao et al. 2023), with every
// answer computed by exact search over rationals (docs/corpus.md); the game itself (steps, labels,
// the solver) is in tasks/game24.h:
//
//   propose                              value
//   Input: 4 5 6 10                      Value: 4 4 10
//   Possible next steps:                 10 - 4 = 6 (left: 4 6)
//   4 + 5 = 9 (left: 6 9 10)             4 * 6 = 24 (left: 24)
//   10 - 4 = 6 (left: 5 6 6)             sure
//   ...
//
// For the labels sure and likely the lines before the label are one solution.
#pragma once

#include <string>

#include "tasks/corpus_rng.h"
#include "tasks/game24.h"

namespace grove {

std::string GenerateGame24Propose(CorpusRng& rng);
std::string GenerateGame24Value(CorpusRng& rng);

}  // namespace grove
