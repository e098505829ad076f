#include "train/corpus_game24.h"

#include <algorithm>

#include "base/error.h"
#include "tasks/game24_prompts.h"
#include "tasks/game24_puzzles.h"

namespace grove {
namespace {

// Numbers in the value prompts are what remains after some steps, so they range wider than the four
// starting numbers (1..13, as in the 4nums.com set tree-of-thoughts uses).
constexpr int kMaxStartNumber = kGame24MaxNumber;
constexpr int kMaxRemainingNumber = 24;
constexpr int kMaxProposals = 8;

std::vector<Rational> DrawNumbers(CorpusRng& rng, int count, int max_value) {
  std::vector<Rational> v;
  v.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) v.push_back({rng.Range(1, max_value), 1});
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

std::string GenerateGame24Propose(CorpusRng& rng) {
  const int count = rng.Chance(0.7) ? 4 : 3;
  const std::vector<Rational> numbers =
      DrawNumbers(rng, count, count == 4 ? kMaxStartNumber : kMaxRemainingNumber);
  std::vector<Game24Step> steps = Game24NaturalSteps(numbers);
  rng.Shuffle(&steps);
  steps.resize(std::min<std::size_t>(steps.size(), kMaxProposals));
  // The prompt the search asks the model with is this document's first two lines.
  std::string out = Game24ProposePrompt(numbers);
  for (const Game24Step& step : steps) out += FormatGame24Step(step) + "\n";
  return out;
}

std::string GenerateGame24Value(CorpusRng& rng) {
  // Natural draws are mostly impossible; aim at a label drawn uniformly and redraw the numbers (a
  // bounded number of times) so the three labels are all well represented.
  static constexpr double kCountWeights[] = {0.35, 0.45, 0.2};  // 2, 3, 4 numbers
  const double u = rng.Unit();
  int count = u < kCountWeights[0] ? 2 : u < kCountWeights[0] + kCountWeights[1] ? 3 : 4;
  const auto wanted = static_cast<Game24Label>(rng.Below(3));
  // "likely" needs room for a fraction: no pair of whole numbers has it, and few triples in range
  // do, while about 1 starting hand in 60 does (the 4nums.com set), so it is drawn from hands.
  if (wanted == Game24Label::kLikely) count = 4;
  std::vector<int> numbers;
  Game24Value value;
  for (int attempt = 0; attempt < 200; ++attempt) {
    numbers.clear();
    for (const Rational& r :
         DrawNumbers(rng, count, count == 4 ? kMaxStartNumber : kMaxRemainingNumber)) {
      numbers.push_back(static_cast<int>(r.num));
    }
    value = EvaluateGame24(numbers);
    if (value.label == wanted) break;
  }
  std::vector<Rational> rationals;
  rationals.reserve(numbers.size());
  for (int n : numbers) rationals.push_back({n, 1});
  std::string out = Game24ValuePrompt(rationals);  // the value prompt is the first line
  for (const Game24Step& step : value.solution) out += FormatGame24Step(step) + "\n";
  out += StrCat(Game24LabelName(value.label), "\n");
  return out;
}

}  // namespace grove
