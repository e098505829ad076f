// Tree-of-thought breadth-first search for the Game of 24: Yao et al. 2023 ("Tree of Thoughts:
// Deliberate Problem Solving with Large Language Models"), Algorithm 1 (ToT-BFS), as the SEED paper
// runs it, with a thought generator G and a state evaluator E that are both the language model:
//
//   S_0 = {puzzle}
//   for t = 1..T:
//     S'_t = {[s, z] : s in S_{t-1}, z in G(s, n)}      // n propose generations per state
//     V_t  = E(S'_t)                                     // one value generation per candidate
//     S_t  = the `breadth` best of S'_t by V_t
//   answer: the best state of S_T that is exactly {24}
//
// G and E each run as ONE call of the GenerateFn over all their generations, so the scheduler sees
// the whole step's work at once. In grove's version:
// - G: the n generations of one state share its propose prompt (shares_prompt_with points at the
//   first). Each text is read into steps (tasks/game24_prompts.h) and each step is taken from its
//   state as settings.arithmetic says (Game24TakeStep): kAsWritten keeps it only when it is
//   consistent with the state (Game24StepConsistent); kExact keeps the model's choice of two of the
//   state's numbers and an operation and redoes the arithmetic exactly. Either way this is a
//   choice: ToT keeps the model's text as it is and checks only the final answer; grove does not
//   carry arithmetic the model got wrong into a state (under kAsWritten such a step is dropped,
//   which only removes dead states: a state reached by a wrong step does not hold the numbers it
//   claims). The final answer is still checked independently (Game24CheckAnswer). Candidates are
//   deduplicated per parent by the state they reach (the numbers left).
// - E: the value prompt of each candidate's numbers; value 20 for "sure", 1 for "likely", 0.001
//   for "impossible": the values of ToT's Game-of-24 task (value_outputs_unwrap in
//   src/tot/tasks/game24.py of princeton-nlp/tree-of-thought-llm). ToT sums them over 3 value
//   samples, where a sample with no label adds 0; here one generation is asked per candidate and a
//   text with no label is valued 0.001, like "impossible". A candidate with one number left is
//   valued without a generation, 20 when it is 24 (final) and 0.001 otherwise: the value format's
//   one-number case is not in the training corpus (its value documents hold 2 to 4 numbers), so
//   the model has never seen that question, while the answer is plain to read (ToT asks a separate
//   "judge the answer" prompt there, which the corpus does not have either).
// - Selection keeps the `breadth` candidates of highest value; ties keep generation order (parent
//   order, then sample, then line), as a stable sort does.
// States with one number left are not expanded; the search stops early when no state can be
// (with 4 numbers that is after T = 3 steps), or when a step yields no candidate.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tot/generation.h"
#include "tot/search_tree.h"

namespace grove {

// ToT's values for the three labels.
inline constexpr double kThoughtValueSure = 20.0;
inline constexpr double kThoughtValueLikely = 1.0;
inline constexpr double kThoughtValueImpossible = 0.001;

struct ThoughtSearchSettings {
  int32_t thoughts = 3;             // n: propose generations per state (1 to 1,024)
  int32_t breadth = 5;              // b: states kept per step (1 to 1,024)
  int32_t steps = 3;                // T: at most this many expansions (1 to 64); 3 solves 4 numbers
  int32_t propose_max_tokens = 96;  // a proposal document holds up to 8 step lines
  int32_t value_max_tokens = 64;    // a value document holds up to 3 step lines and the label
  uint64_t seed = 0;                // of the sequence keys (tot/sequence_key.h)
  // How proposed steps are read (tasks/game24.h): as written (a step with wrong arithmetic is
  // dropped), or the model's choice of numbers and operation with exact arithmetic.
  Game24Arithmetic arithmetic = Game24Arithmetic::kExact;
};
// Throws grove::Error naming the setting when one is out of its range.
void ValidateThoughtSearchSettings(const ThoughtSearchSettings& settings);

// Work and time of one G or E call.
struct ThoughtPhaseStats {
  int32_t generations = 0;
  double seconds = 0;  // wall time of the GenerateFn call (0 when there was nothing to generate)
};

struct ThoughtStepStats {
  int32_t step = 0;            // t, from 1
  int32_t states = 0;          // |S_{t-1}| expanded
  int32_t parsed_steps = 0;    // step lines read from the proposals
  int32_t inconsistent = 0;    // of those, rejected by Game24StepConsistent
  int32_t duplicates = 0;      // of those, reaching a state the same parent already reached
  int32_t candidates = 0;      // |S'_t|
  int32_t kept = 0;            // |S_t|
  ThoughtPhaseStats generate;  // G
  ThoughtPhaseStats evaluate;  // E
};

struct ThoughtSearchResult {
  SearchTree tree;
  std::vector<ThoughtStepStats> steps;  // the steps run (fewer than T when it stopped early)
  ThoughtPhaseStats generate;           // all G calls together
  ThoughtPhaseStats evaluate;           // all E calls together
  double seconds = 0;                   // wall time of the whole search
  std::string answer;    // expression of the answer path ("(13 - 9) * (10 - 4) = 24"); empty: none
  bool correct = false;  // Game24CheckAnswer accepts the answer
};

// Runs the search on `puzzle` (2 to 6 numbers, each 0 to 1,000,000; the game uses 4 from 1..13).
// Throws grove::Error on bad settings or puzzle, and when `generate` returns another number of
// texts than it was given requests; exceptions from `generate` pass through.
ThoughtSearchResult SolveGame24WithThoughts(std::span<const int> puzzle,
                                            const ThoughtSearchSettings& settings,
                                            const GenerateFn& generate);

// The value of a label read from a value generation (nullopt: no label).
double ThoughtValue(std::optional<Game24Label> label);

}  // namespace grove
