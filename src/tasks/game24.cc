#include "tasks/game24.h"

#include <algorithm>
#include <set>

#include "base/error.h"
#include "base/named.h"

namespace grove {
namespace {

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
  auto add = [&](Rational a, char op, Rational b) {
    const std::optional<Rational> r = ApplyRational(a, op, b);
    GROVE_CHECK(r.has_value());  // the solver's numbers stay small; division by 0 is skipped below
    if (!natural_only || r->is_natural()) out->push_back({a, op, b, *r, {}});
  };
  const Rational lo = std::min(x, y), hi = std::max(x, y);
  add(lo, '+', hi);
  add(lo, '*', hi);
  add(hi, '-', lo);
  if (!natural_only) add(lo, '-', hi);
  if (lo.num != 0) add(hi, '/', lo);
  if (hi.num != 0 && !(hi == lo)) add(lo, '/', hi);
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

}  // namespace

constexpr Named<Game24Label> kGame24LabelNames[] = {
    {Game24Label::kSure, "sure"},
    {Game24Label::kLikely, "likely"},
    {Game24Label::kImpossible, "impossible"},
};

std::string_view Game24LabelName(Game24Label label) { return NameOf(kGame24LabelNames, label); }

std::optional<Game24Label> Game24LabelNamed(std::string_view name) {
  return FindNamed(kGame24LabelNames, name);
}

std::string FormatGame24Step(const Game24Step& step) {
  // Operands that are not natural go in parentheses, so "6 / (1/4)" cannot be read as "6 / 1 / 4".
  auto operand = [](const Rational& r) {
    return r.is_natural() ? FormatRational(r) : StrCat("(", FormatRational(r), ")");
  };
  return StrCat(operand(step.a), " ", step.op, " ", operand(step.b), " = ",
                FormatRational(step.result), " (left: ", FormatGame24Numbers(step.left), ")");
}

std::string FormatGame24Numbers(std::span<const Rational> numbers) {
  std::string s;
  for (const Rational& r : numbers) {
    if (!s.empty()) s += ' ';
    s += FormatRational(r);
  }
  return s;
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

bool Game24StepConsistent(std::span<const Rational> state, const Game24Step& step) {
  std::vector<Rational> rest(state.begin(), state.end());
  for (const Rational& operand : {step.a, step.b}) {
    const auto it = std::find(rest.begin(), rest.end(), operand);
    if (it == rest.end()) return false;
    rest.erase(it);
  }
  const std::optional<Rational> result = ApplyRational(step.a, step.op, step.b);
  if (!result || !(*result == step.result)) return false;
  rest.push_back(*result);
  std::sort(rest.begin(), rest.end());
  return rest == step.left;
}

std::optional<Game24Step> Game24TakeStep(std::span<const Rational> state, const Game24Step& step,
                                         Game24Arithmetic arithmetic) {
  if (arithmetic == Game24Arithmetic::kAsWritten) {
    if (!Game24StepConsistent(state, step)) return std::nullopt;
    return step;
  }
  std::vector<Rational> rest(state.begin(), state.end());
  for (const Rational& operand : {step.a, step.b}) {
    const auto it = std::find(rest.begin(), rest.end(), operand);
    if (it == rest.end()) return std::nullopt;
    rest.erase(it);
  }
  const std::optional<Rational> result = ApplyRational(step.a, step.op, step.b);
  if (!result) return std::nullopt;
  Game24Step taken = step;
  taken.result = *result;
  rest.push_back(*result);
  std::sort(rest.begin(), rest.end());
  taken.left = std::move(rest);
  return taken;
}

}  // namespace grove
