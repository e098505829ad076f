#include "tasks/game24_answer.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "base/error.h"
#include "tasks/game24_prompts.h"

namespace grove {
namespace {

constexpr int kMaxNesting = 64;
constexpr std::size_t kMaxDigits = 9;

std::vector<Rational> PuzzleNumbers(std::span<const int> puzzle) {
  std::vector<Rational> numbers;
  for (int n : puzzle) numbers.push_back({n, 1});
  return numbers;
}

// A number reached so far and the expression that computes it.
struct Term {
  Rational value;
  std::string text;
  bool compound = false;
};

// Recursive descent over one expression, evaluated as it is read:
//   sum := product (('+' | '-') product)*
//   product := factor (('*' | '/') factor)*
//   factor := integer | '(' sum ')'
// Every failure (unexpected character, division by zero, overflow, nesting) ends the parse.
class ExpressionReader {
 public:
  explicit ExpressionReader(std::string_view s) : s_(s) {}

  std::optional<Rational> ReadSum() { return ReadChain(&ExpressionReader::ReadProduct, '+', '-'); }
  // The first non-space character from here, or '\0' at the end.
  char Peek() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  bool ReadInteger(int64_t* value) {
    Peek();
    const std::size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (pos_ - start == kMaxDigits) return false;
      v = v * 10 + (s_[pos_++] - '0');
    }
    *value = v;
    return pos_ > start;
  }
  const std::vector<int64_t>& literals() const { return literals_; }

 private:
  std::optional<Rational> ReadProduct() {
    return ReadChain(&ExpressionReader::ReadFactor, '*', '/');
  }
  // operand ((op_a | op_b) operand)*, left to right; nullopt as soon as a step fails (a division
  // by zero among them).
  std::optional<Rational> ReadChain(std::optional<Rational> (ExpressionReader::*operand)(),
                                    char op_a, char op_b) {
    std::optional<Rational> value = (this->*operand)();
    while (value) {
      const char op = Peek();
      if (op != op_a && op != op_b) break;
      ++pos_;
      const std::optional<Rational> rhs = (this->*operand)();
      if (!rhs) return std::nullopt;
      value = ApplyRational(*value, op, *rhs);
    }
    return value;
  }
  std::optional<Rational> ReadFactor() {
    if (Peek() == '(') {
      if (++depth_ > kMaxNesting) return std::nullopt;
      ++pos_;
      std::optional<Rational> value = ReadSum();
      if (!value || Peek() != ')') return std::nullopt;
      ++pos_;
      --depth_;
      return value;
    }
    int64_t n = 0;
    if (!ReadInteger(&n)) return std::nullopt;
    literals_.push_back(n);
    return Rational{n, 1};
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  std::vector<int64_t> literals_;
};

}  // namespace

std::string Game24Expression(std::span<const int> puzzle, std::span<const Game24Step> steps) {
  std::vector<Term> terms;
  for (int n : puzzle) terms.push_back({{n, 1}, std::to_string(n), false});
  for (const Game24Step& step : steps) {
    std::vector<Rational> state;
    state.reserve(terms.size());
    for (const Term& t : terms) state.push_back(t.value);
    if (!Game24StepConsistent(state, step)) return "";
    // Take the operands' terms; among equal values the earliest, which is as good as any other.
    auto take = [&](const Rational& value) {
      const auto it =
          std::find_if(terms.begin(), terms.end(), [&](const Term& t) { return t.value == value; });
      Term term = *it;
      terms.erase(it);
      return term.compound ? StrCat("(", term.text, ")") : term.text;
    };
    const std::string a = take(step.a);
    const std::string b = take(step.b);
    terms.push_back({step.result, StrCat(a, " ", step.op, " ", b), true});
  }
  if (terms.size() != 1) return "";
  return StrCat(terms[0].text, " = ", FormatRational(terms[0].value));
}

bool Game24CheckAnswer(std::span<const int> puzzle, std::string_view expression) {
  const std::size_t equals = expression.find('=');
  ExpressionReader reader(expression.substr(0, equals));
  const std::optional<Rational> value = reader.ReadSum();
  if (!value || reader.Peek() != '\0' || !(*value == Rational{24, 1})) return false;
  if (equals != std::string_view::npos) {
    // The right-hand side, when there is one, is the integer 24 and nothing else.
    ExpressionReader rhs(expression.substr(equals + 1));
    int64_t n = 0;
    if (!rhs.ReadInteger(&n) || n != 24 || rhs.Peek() != '\0') return false;
  }
  std::vector<int64_t> used = reader.literals(), wanted(puzzle.begin(), puzzle.end());
  std::sort(used.begin(), used.end());
  std::sort(wanted.begin(), wanted.end());
  return used == wanted;
}

std::string Game24DirectPrompt(std::span<const int> puzzle) {
  return Game24ValuePrompt(PuzzleNumbers(puzzle));
}

std::string Game24DirectAnswer(std::span<const int> puzzle, std::string_view generated_text,
                               Game24Arithmetic arithmetic) {
  std::vector<Rational> state = PuzzleNumbers(puzzle);
  std::vector<Game24Step> path;
  for (std::string_view line : Game24DocumentLines(generated_text)) {
    if (ParseGame24Label(line)) break;  // the label ends the solution
    const std::optional<Game24Step> written = ParseGame24StepLine(line);
    const std::optional<Game24Step> step =
        written ? Game24TakeStep(state, *written, arithmetic) : std::nullopt;
    if (!step) continue;
    path.push_back(*step);
    state = step->left;
  }
  if (state != std::vector<Rational>{{24, 1}}) return "";
  return Game24Expression(puzzle, path);
}

}  // namespace grove
