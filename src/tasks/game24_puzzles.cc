#include "tasks/game24_puzzles.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "base/error.h"
#include "tasks/corpus_rng.h"
#include "tasks/game24.h"

namespace grove {
namespace {

// The stream of puzzle draws: "game24" in ASCII, so that it is not the stream of a corpus document
// (those are numbered from 0).
constexpr uint64_t kPuzzleStream = 0x67616d653234ull;
// Draws before giving up. Drawing all 1,362 solvable hands takes a few hundred thousand draws (the
// rarest, four equal numbers, comes once in 13^4), so this is never reached.
constexpr int64_t kMaxDraws = 100'000'000;

}  // namespace

Game24Puzzle ParseGame24Puzzle(std::string_view text) {
  std::vector<std::string> tokens;
  std::string token;
  for (char c : std::string(text) + " ") {
    if (c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '\r') {
      if (!token.empty()) tokens.push_back(token);
      token.clear();
    } else {
      token += c;
    }
  }
  if (tokens.size() != 4) {
    Fail("game24: puzzle '", text, "' has ", tokens.size(),
         " numbers; expected 4, separated by spaces or commas (e.g. \"4 9 10 13\")");
  }
  Game24Puzzle puzzle;
  for (std::size_t i = 0; i < 4; ++i) {
    const std::string& t = tokens[i];
    if (!std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      Fail("game24: puzzle '", text, "': '", t, "' is not a whole number");
    }
    const int n = t.size() > 3 ? kGame24MaxNumber + 1 : std::stoi(t);
    if (n < kGame24MinNumber || n > kGame24MaxNumber) {
      Fail("game24: puzzle '", text, "': ", t, " is out of range (numbers are ", kGame24MinNumber,
           " to ", kGame24MaxNumber, ", as in the training corpus)");
    }
    puzzle[i] = n;
  }
  std::sort(puzzle.begin(), puzzle.end());
  return puzzle;
}

std::vector<Game24Puzzle> Game24Puzzles(uint64_t seed, int count) {
  if (count < 0 || count > kGame24SolvableHands) {
    Fail("game24: cannot draw ", count, " distinct solvable puzzles (0 to ", kGame24SolvableHands,
         " exist)");
  }
  CorpusRng rng(seed, kPuzzleStream);
  std::map<Game24Puzzle, bool> solvable;  // hands evaluated so far
  std::set<Game24Puzzle> drawn;
  std::vector<Game24Puzzle> puzzles;
  for (int64_t draw = 0; static_cast<int>(puzzles.size()) < count; ++draw) {
    GROVE_CHECK(draw < kMaxDraws);
    Game24Puzzle hand;
    for (int& n : hand) n = rng.Range(kGame24MinNumber, kGame24MaxNumber);
    std::sort(hand.begin(), hand.end());
    auto [it, fresh] = solvable.try_emplace(hand, false);
    if (fresh) it->second = EvaluateGame24(hand).label != Game24Label::kImpossible;
    if (it->second && drawn.insert(hand).second) puzzles.push_back(hand);
  }
  return puzzles;
}

}  // namespace grove
