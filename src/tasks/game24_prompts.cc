#include "tasks/game24_prompts.h"

#include <algorithm>

#include "base/error.h"

namespace grove {
namespace {

// Integers longer than this are not read: they cannot come from a game with numbers up to 13, and
// the limit keeps every parsed value far from overflow.
constexpr std::size_t kMaxDigits = 12;

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<Rational> Sorted(std::span<const Rational> numbers) {
  std::vector<Rational> sorted(numbers.begin(), numbers.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

// A cursor over one line; every Read* leaves the position unspecified when it fails, which is fine
// as a failure abandons the line.
class LineReader {
 public:
  explicit LineReader(std::string_view s) : s_(s) {}

  bool AtEnd() const { return pos_ == s_.size(); }
  void SkipSpaces() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  // One or more spaces.
  bool ReadSpaces() {
    const std::size_t start = pos_;
    SkipSpaces();
    return pos_ > start;
  }
  bool ReadLiteral(std::string_view literal) {
    if (s_.substr(pos_, literal.size()) != literal) return false;
    pos_ += literal.size();
    return true;
  }
  bool ReadNatural(int64_t* value) {
    const std::size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (pos_ - start == kMaxDigits) return false;
      v = v * 10 + (s_[pos_] - '0');
      ++pos_;
    }
    *value = v;
    return pos_ > start;
  }
  // ['-'] digits ['/' digits], denominator not 0.
  bool ReadRational(Rational* r) {
    const bool negative = ReadLiteral("-");
    int64_t num = 0, den = 1;
    if (!ReadNatural(&num)) return false;
    if (ReadLiteral("/") && (!ReadNatural(&den) || den == 0)) return false;
    *r = Rational::Make(negative ? -num : num, den);
    return true;
  }
  // A natural number, or a rational in parentheses.
  bool ReadOperand(Rational* r) {
    if (!ReadLiteral("(")) {
      int64_t n = 0;
      if (!ReadNatural(&n)) return false;
      *r = {n, 1};
      return true;
    }
    return ReadRational(r) && ReadLiteral(")");
  }
  bool ReadOp(char* op) {
    if (pos_ == s_.size() || std::string_view("+-*/").find(s_[pos_]) == std::string_view::npos)
      return false;
    *op = s_[pos_++];
    return true;
  }

 private:
  std::string_view s_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string Game24ProposePrompt(std::span<const Rational> numbers) {
  return StrCat("Input: ", FormatGame24Numbers(Sorted(numbers)), "\nPossible next steps:\n");
}

std::string Game24ValuePrompt(std::span<const Rational> numbers) {
  return StrCat("Value: ", FormatGame24Numbers(Sorted(numbers)), "\n");
}

std::vector<std::string_view> Game24DocumentLines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (Trim(line).empty()) {
      if (lines.empty()) continue;  // leading empty lines
      break;                        // the end of the document
    }
    lines.push_back(line);
  }
  return lines;
}

std::optional<Game24Step> ParseGame24StepLine(std::string_view line) {
  LineReader in(Trim(line));
  Game24Step step;
  if (!in.ReadOperand(&step.a) || !in.ReadSpaces() || !in.ReadOp(&step.op) || !in.ReadSpaces() ||
      !in.ReadOperand(&step.b) || !in.ReadSpaces() || !in.ReadLiteral("=") || !in.ReadSpaces() ||
      !in.ReadRational(&step.result) || !in.ReadSpaces() || !in.ReadLiteral("(left:")) {
    return std::nullopt;
  }
  // One or more numbers, each after at least one space; then ")" and the end of the line.
  for (;;) {
    const bool spaced = in.ReadSpaces();
    if (in.ReadLiteral(")")) break;
    Rational r;
    if (!spaced || !in.ReadRational(&r)) return std::nullopt;
    step.left.push_back(r);
  }
  if (step.left.empty() || !in.AtEnd()) return std::nullopt;
  return step;
}

std::vector<Game24Step> ParseGame24Steps(std::string_view text) {
  std::vector<Game24Step> steps;
  for (std::string_view line : Game24DocumentLines(text)) {
    if (std::optional<Game24Step> step = ParseGame24StepLine(line)) steps.push_back(*step);
  }
  return steps;
}

std::optional<Game24Label> ParseGame24Label(std::string_view text) {
  const std::vector<std::string_view> lines = Game24DocumentLines(text);
  if (lines.empty()) return std::nullopt;
  const std::string_view last = Trim(lines.back());
  return Game24LabelNamed(last);
}

}  // namespace grove
