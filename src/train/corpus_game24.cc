#include "train/corpus_game24.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "base/error.h"

namespace grove {
namespace {

// Numbers in the value prompts are what remains after some steps, so they range wider than the four
// starting numbers (1..13, as in the 4nums.com set tree-of-thoughts uses).
constexpr int kMaxStartNumber = 13;
constexpr int kMaxRemainingNumber = 24;
constexpr int kMaxProposals = 8;

std::vector<Rational> SortedLeft(std::span<const Rational> numbers, std::size_t skip_i,
                                 std::size_t skip_j, Rational result) {
  std::vector<Rational> left;
  for (std::size_t k = 0; k < numbers.size(); ++k) {
    if (k != skip_i && k != skip_j) left.push_back(numbers[k]);
  }
  left.push_back(result);
  std::sort(left.begin(), left.end());
  return left;
}

// All results of combining x and y in either order; natural_only keeps those a person writes down.
// Each candidate is (a, op, b, result).
void Combinations(Rational x, Rational y, bool natural_only, std::vector<Game24Step>* out) {
  out->clear();
  auto add = [&](Rational a, char op, Rational b, Rational r) {
    if (!natural_only || r.is_natural()) out->push_back({a, op, b, r, {}});
  };
  const Rational lo = std::min(x, y), hi = std::max(x, y);
  add(lo, '+', hi, Rational::Make(x.num * y.den + y.num * x.den, x.den * y.den));
  add(lo, '*', hi, Rational::Make(x.num * y.num, x.den * y.den));
  add(hi, '-', lo, Rational::Make(hi.num * lo.den - lo.num * hi.den, hi.den * lo.den));
  if (!natural_only)
    add(lo, '-', hi, Rational::Make(lo.num * hi.den - hi.num * lo.den, hi.den * lo.den));
  if (lo.num != 0) add(hi, '/', lo, Rational::Make(hi.num * lo.den, hi.den * lo.num));
  if (hi.num != 0 && !(hi == lo))
    add(lo, '/', hi, Rational::Make(lo.num * hi.den, lo.den * hi.num));
}

// Depth-first search; on success `path` holds the steps (with `left` filled in).
bool Reach24(const std::vector<Rational>& numbers, bool natural_only,
             std::vector<Game24Step>* path) {
  if (numbers.size() == 1) return numbers[0] == Rational{24, 1};
  std::vector<Game24Step> candidates;
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    for (std::size_t j = i + 1; j < numbers.size(); ++j) {
      Combinations(numbers[i], numbers[j], natural_only, &candidates);
      for (Game24Step& step : candidates) {
        step.left = SortedLeft(numbers, i, j, step.result);
        path->push_back(step);
        if (Reach24(step.left, natural_only, path)) return true;
        path->pop_back();
      }
    }
  }
  return false;
}

std::string FormatNumbers(std::span<const Rational> numbers) {
  std::string s;
  for (const Rational& r : numbers) {
    if (!s.empty()) s += ' ';
    s += FormatRational(r);
  }
  return s;
}

std::vector<Rational> DrawNumbers(CorpusRng& rng, int count, int max_value) {
  std::vector<Rational> v;
  for (int i = 0; i < count; ++i) v.push_back({rng.Range(1, max_value), 1});
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

Rational Rational::Make(int64_t num, int64_t den) {
  GROVE_CHECK(den != 0);
  if (den < 0) num = -num, den = -den;
  const int64_t g = std::gcd(num < 0 ? -num : num, den);
  return {num / g, den / g};
}

std::string FormatRational(const Rational& r) {
  return r.den == 1 ? std::to_string(r.num) : StrCat(r.num, "/", r.den);
}

std::string_view Game24LabelName(Game24Label label) {
  switch (label) {
    case Game24Label::kSure:
      return "sure";
    case Game24Label::kLikely:
      return "likely";
    case Game24Label::kImpossible:
      return "impossible";
  }
  return "?";
}

std::string FormatGame24Step(const Game24Step& step) {
  // Operands that are not natural go in parentheses, so "6 / (1/4)" cannot be read as "6 / 1 / 4".
  auto operand = [](const Rational& r) {
    return r.is_natural() ? FormatRational(r) : StrCat("(", FormatRational(r), ")");
  };
  return StrCat(operand(step.a), " ", step.op, " ", operand(step.b), " = ",
                FormatRational(step.result), " (left: ", FormatNumbers(step.left), ")");
}

Game24Value EvaluateGame24(std::span<const int> numbers) {
  std::vector<Rational> start;
  for (int n : numbers) start.push_back({n, 1});
  std::sort(start.begin(), start.end());
  Game24Value value;
  if (Reach24(start, /*natural_only=*/true, &value.solution)) {
    value.label = Game24Label::kSure;
  } else if (Reach24(start, /*natural_only=*/false, &value.solution)) {
    value.label = Game24Label::kLikely;
  }
  return value;
}

std::vector<Game24Step> Game24NaturalSteps(std::span<const Rational> numbers) {
  std::vector<Game24Step> steps, candidates;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    for (std::size_t j = i + 1; j < numbers.size(); ++j) {
      Combinations(numbers[i], numbers[j], /*natural_only=*/true, &candidates);
      for (Game24Step& step : candidates) {
        step.left = SortedLeft(numbers, i, j, step.result);
        if (seen.insert(FormatGame24Step(step)).second) steps.push_back(std::move(step));
      }
    }
  }
  return steps;
}

std::string GenerateGame24Propose(CorpusRng& rng) {
  const int count = rng.Chance(0.7) ? 4 : 3;
  const std::vector<Rational> numbers =
      DrawNumbers(rng, count, count == 4 ? kMaxStartNumber : kMaxRemainingNumber);
  std::vector<Game24Step> steps = Game24NaturalSteps(numbers);
  rng.Shuffle(&steps);
  steps.resize(std::min<std::size_t>(steps.size(), kMaxProposals));
  std::string out = StrCat("Input: ", FormatNumbers(numbers), "\nPossible next steps:\n");
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
  std::string out = "Value:";
  for (int n : numbers) out += StrCat(" ", n);
  out += "\n";
  for (const Game24Step& step : value.solution) out += FormatGame24Step(step) + "\n";
  out += StrCat(Game24LabelName(value.label), "\n");
  return out;
}

}  // namespace grove
