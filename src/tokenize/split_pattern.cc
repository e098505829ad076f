#include "tokenize/split_pattern.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <array>
#include <utility>

#include "base/error.h"
#include "base/function_ref.h"

namespace grove {
namespace {

uint8_t CategoryOf(UChar32 c) {
  if (c < 0) return kCategorySymbol;  // an ill-formed sequence: llama.cpp reads it as U+FFFD (So)
  switch (u_charType(c)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return kCategoryLetter;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return kCategoryNumber;
    case U_CONNECTOR_PUNCTUATION:
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
      return kCategoryPunctuation;
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
      return kCategoryMark;
    case U_MATH_SYMBOL:
    case U_CURRENCY_SYMBOL:
    case U_MODIFIER_SYMBOL:
    case U_OTHER_SYMBOL:
      return kCategorySymbol;
    case U_SPACE_SEPARATOR:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
      return kCategorySeparator;
    default:
      return kCategoryOther;
  }
}

CodePointInfo Classify(UChar32 c) {
  // Most text is ASCII; a table avoids two ICU calls per character there.
  static const std::array<CodePointInfo, 128> kAscii = [] {
    std::array<CodePointInfo, 128> table{};
    for (UChar32 i = 0; i < 128; ++i) table[i] = {i, CategoryOf(i), u_isUWhiteSpace(i) != 0};
    return table;
  }();
  if (c >= 0 && c < 128) return kAscii[c];
  return {c, CategoryOf(c), c >= 0 && u_isUWhiteSpace(c) != 0};
}

// A set of code points: ranges, category groups and \s / \S, possibly negated, and possibly
// intersected with further sets (what a lookahead guard in front of one character adds).
struct CharSet {
  std::vector<std::pair<int32_t, int32_t>> ranges;
  uint8_t categories = 0;      // \p{..}
  uint8_t not_categories = 0;  // \P{..}
  bool space = false;          // \s
  bool not_space = false;      // \S
  bool negated = false;
  std::vector<CharSet> also;

  bool Matches(const CodePointInfo& c) const {
    bool in = (categories & c.category) != 0 || (not_categories & ~c.category) != 0 ||
              (space && c.space) || (not_space && !c.space);
    for (std::size_t i = 0; !in && i < ranges.size(); ++i) {
      in = c.cp >= ranges[i].first && c.cp <= ranges[i].second;
    }
    if (in == negated) return false;
    for (const CharSet& s : also) {
      if (!s.Matches(c)) return false;
    }
    return true;
  }
};

}  // namespace

void ClassifyCodePoints(std::string_view text, std::vector<CodePointInfo>* cps,
                        std::vector<std::size_t>* byte_offsets) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const auto length = static_cast<int64_t>(text.size());
  cps->clear();
  byte_offsets->clear();
  cps->reserve(text.size());
  byte_offsets->reserve(text.size() + 1);
  for (int64_t i = 0; i < length;) {
    byte_offsets->push_back(static_cast<std::size_t>(i));
    UChar32 c;
    U8_NEXT(s, i, length, c);
    cps->push_back(Classify(c));
  }
  byte_offsets->push_back(text.size());
}

struct SplitPattern::Node {
  enum class Kind { kSet, kSequence, kAlternation, kRepeat, kLookahead };
  Kind kind = Kind::kSequence;
  CharSet set;                 // kSet
  std::vector<Node> children;  // kSequence, kAlternation; kRepeat and kLookahead: one
  int min = 0;                 // kRepeat
  int max = -1;                // kRepeat; -1: unbounded
  bool negative = false;       // kLookahead
};

namespace {

using Node = SplitPattern::Node;
using Kind = Node::Kind;

// Recursive descent over the pattern's code points.
class PatternParser {
 public:
  explicit PatternParser(std::string_view pattern) : pattern_(pattern) {
    const auto* s = reinterpret_cast<const uint8_t*>(pattern.data());
    const auto length = static_cast<int64_t>(pattern.size());
    for (int64_t i = 0; i < length;) {
      UChar32 c;
      U8_NEXT(s, i, length, c);
      if (c < 0) Fail("split pattern: ill-formed UTF-8 in '", pattern, "'");
      cps_.push_back(c);
    }
  }

  Node Parse() {
    Node root = ParseAlternation();
    if (pos_ < cps_.size()) Error("unbalanced ')'");
    return root;
  }

 private:
  [[noreturn]] void Error(std::string_view what) const {
    Fail("split pattern '", pattern_, "': ", what, " at character ", pos_,
         " (grove supports the subset pre-tokenizer patterns use; see split_pattern.h)");
  }
  bool AtEnd() const { return pos_ >= cps_.size(); }
  UChar32 Peek(std::size_t ahead = 0) const {
    return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead] : -1;
  }
  bool Accept(UChar32 c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }

  Node ParseAlternation() {
    Node alt;
    alt.kind = Kind::kAlternation;
    alt.children.push_back(ParseSequence());
    while (Accept('|')) alt.children.push_back(ParseSequence());
    return alt.children.size() == 1 ? std::move(alt.children[0]) : std::move(alt);
  }

  Node ParseSequence() {
    Node seq;
    seq.kind = Kind::kSequence;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      Node atom = ParseAtom();
      seq.children.push_back(ParseQuantifier(std::move(atom)));
    }
    FoldGuards(&seq);
    return seq.children.size() == 1 ? std::move(seq.children[0]) : std::move(seq);
  }

  // (?=[A])[B] and (?![A])[B] read one character: fold them into one set, so that a quantifier
  // over them (Tekken's ((?=[\p{L}])([^a-z]))*) is a loop.
  static void FoldGuards(Node* seq) {
    std::vector<Node> out;
    for (std::size_t i = 0; i < seq->children.size(); ++i) {
      Node& n = seq->children[i];
      if (n.kind == Kind::kLookahead && n.children[0].kind == Kind::kSet &&
          i + 1 < seq->children.size() && seq->children[i + 1].kind == Kind::kSet) {
        CharSet guard = n.children[0].set;
        if (n.negative) {  // (?![A])[B]: B and not A
          if (!guard.also.empty()) Fail("split pattern: a negative lookahead over a compound set");
          guard.negated = !guard.negated;
        }
        Node& next = seq->children[i + 1];
        next.set.also.push_back(std::move(guard));
        out.push_back(std::move(next));
        ++i;
        continue;
      }
      out.push_back(std::move(n));
    }
    seq->children = std::move(out);
  }

  Node ParseQuantifier(Node atom) {
    int min = -1;
    int max = -1;
    if (Accept('*')) {
      min = 0;
    } else if (Accept('+')) {
      min = 1;
    } else if (Accept('?')) {
      min = 0;
      max = 1;
    } else if (Peek() == '{') {
      ++pos_;
      min = ParseCount();
      max = min;
      if (Accept(',')) max = Peek() == '}' ? -1 : ParseCount();
      if (!Accept('}')) Error("expected '}'");
      if (max >= 0 && max < min) Error("a count {n,m} with m < n");
    } else {
      return atom;
    }
    if (Peek() == '?' || Peek() == '+') Error("lazy and possessive quantifiers are not supported");
    if (atom.kind == Kind::kLookahead) Error("a quantified lookahead");
    if (atom.kind != Kind::kSet && (max < 0 || max > 64)) {
      Error("a quantifier without a small bound over more than one character");
    }
    Node repeat;
    repeat.kind = Kind::kRepeat;
    repeat.min = min;
    repeat.max = max;
    repeat.children.push_back(std::move(atom));
    return repeat;
  }

  int ParseCount() {
    if (Peek() < '0' || Peek() > '9') Error("expected a count");
    int n = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      n = n * 10 + (cps_[pos_++] - '0');
      if (n > 100000) Error("a count over 100000");
    }
    return n;
  }

  Node ParseAtom() {
    const UChar32 c = cps_[pos_++];
    switch (c) {
      case '(':
        return ParseGroup();
      case '[':
        return SetNode(ParseClass());
      case '.': {
        CharSet dot;  // ECMAScript: anything but a line terminator
        dot.negated = true;
        dot.ranges = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};
        return SetNode(std::move(dot));
      }
      case '\\':
        return SetNode(ParseEscape(/*in_class=*/false));
      case '^':
      case '$':
        --pos_;
        Error("anchors are not supported");
      case '*':
      case '+':
      case '?':
      case '{':
        --pos_;
        Error("a quantifier with nothing to repeat");
      default:
        return SetNode(Literal(c));
    }
  }

  Node ParseGroup() {
    bool lookahead = false;
    bool negative = false;
    bool saved_fold = fold_case_;
    if (Accept('?')) {
      if (Accept(':')) {
      } else if (Accept('=')) {
        lookahead = true;
      } else if (Accept('!')) {
        lookahead = negative = true;
      } else if (Peek() == 'i' && Peek(1) == ':') {
        pos_ += 2;
        fold_case_ = true;
      } else {
        Error("this group syntax is not supported (lookbehind, named groups, flags other than i)");
      }
    }
    Node inner = ParseAlternation();
    fold_case_ = saved_fold;
    if (!Accept(')')) Error("expected ')'");
    if (!lookahead) return inner;
    Node look;
    look.kind = Kind::kLookahead;
    look.negative = negative;
    look.children.push_back(std::move(inner));
    return look;
  }

  CharSet ParseClass() {
    CharSet set;
    set.negated = Accept('^');
    while (!AtEnd() && Peek() != ']') {
      UChar32 lo;
      if (Accept('\\')) {
        CharSet escaped = ParseEscape(/*in_class=*/true);
        if (escaped.ranges.size() != 1 || escaped.ranges[0].first != escaped.ranges[0].second ||
            escaped.negated || escaped.categories || escaped.not_categories || escaped.space ||
            escaped.not_space) {
          Merge(escaped, &set);  // a class escape such as \s or \p{L}: no range can follow
          continue;
        }
        lo = escaped.ranges[0].first;
      } else {
        lo = cps_[pos_++];
      }
      UChar32 hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && Peek(1) != -1) {
        ++pos_;
        if (Accept('\\')) {
          CharSet escaped = ParseEscape(/*in_class=*/true);
          if (escaped.ranges.size() != 1) Error("a class escape as the end of a range");
          hi = escaped.ranges[0].first;
        } else {
          hi = cps_[pos_++];
        }
        if (hi < lo) Error("a range whose end is below its start");
      }
      AddRange(lo, hi, &set);
    }
    if (!Accept(']')) Error("expected ']'");
    return set;
  }

  static void Merge(const CharSet& from, CharSet* to) {
    if (from.negated) {  // \S, \D, \P{..} inside a class
      if (from.space) to->not_space = true;
      to->not_categories |= from.categories;
      if (!from.ranges.empty()) Fail("split pattern: \\D or \\W inside a class is not supported");
      return;
    }
    to->categories |= from.categories;
    to->space |= from.space;
    to->not_space |= from.not_space;
    to->not_categories |= from.not_categories;
    to->ranges.insert(to->ranges.end(), from.ranges.begin(), from.ranges.end());
  }

  void AddRange(UChar32 lo, UChar32 hi, CharSet* set) const {
    set->ranges.emplace_back(lo, hi);
    if (!fold_case_) return;
    // ASCII case folding, as std::regex's icase does in the C locale.
    auto fold = [&](UChar32 from, UChar32 to, int delta) {
      const UChar32 a = std::max(lo, from);
      const UChar32 b = std::min(hi, to);
      if (a <= b) set->ranges.emplace_back(a + delta, b + delta);
    };
    fold('a', 'z', 'A' - 'a');
    fold('A', 'Z', 'a' - 'A');
  }

  CharSet Literal(UChar32 c) const {
    CharSet set;
    AddRange(c, c, &set);
    return set;
  }

  CharSet ParseEscape(bool in_class) {
    if (AtEnd()) Error("a trailing backslash");
    const UChar32 c = cps_[pos_++];
    CharSet set;
    switch (c) {
      case 'r':
        return Literal('\r');
      case 'n':
        return Literal('\n');
      case 't':
        return Literal('\t');
      case 'f':
        return Literal('\f');
      case 'v':
        return Literal('\v');
      case 's':
        set.space = true;
        return set;
      case 'S':
        set.space = true;
        set.negated = true;
        return set;
      case 'd':
        set.ranges.emplace_back('0', '9');  // ECMAScript \d is ASCII
        return set;
      case 'D':
        set.ranges.emplace_back('0', '9');
        set.negated = true;
        return set;
      case 'p':
      case 'P':
        set.categories = ParseCategory();
        set.negated = c == 'P';
        return set;
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
          --pos_;
          Error(in_class ? "this escape inside a class is not supported"
                         : "this escape (\\b, \\w, backreferences, ...) is not supported");
        }
        return Literal(c);  // an escaped punctuation character stands for itself
    }
  }

  uint8_t ParseCategory() {
    if (!Accept('{')) Error("expected '{' after \\p");
    std::string name;
    while (!AtEnd() && Peek() != '}') name += static_cast<char>(cps_[pos_++]);
    if (!Accept('}')) Error("expected '}'");
    if (name == "L" || name == "Lu" || name == "Ll" || name == "Lt" || name == "Lm" ||
        name == "Lo") {
      return kCategoryLetter;
    }
    if (name == "N") return kCategoryNumber;
    if (name == "P") return kCategoryPunctuation;
    if (name == "M") return kCategoryMark;
    if (name == "S") return kCategorySymbol;
    Error("the Unicode category \\p{" + name +
          "} is not supported (L, Lu, Ll, Lt, Lm, Lo, N, P, M, S are)");
  }

  static Node SetNode(CharSet set) {
    Node n;
    n.kind = Kind::kSet;
    n.set = std::move(set);
    return n;
  }

  std::string_view pattern_;
  std::vector<UChar32> cps_;
  std::size_t pos_ = 0;
  bool fold_case_ = false;
};

// The continuation of a match: what must still match after a node for the node's match to count.
using Continuation = FunctionRef<bool(std::size_t)>;

class Matcher {
 public:
  Matcher(const std::vector<CodePointInfo>& cps, std::size_t end) : cps_(cps), end_(end) {}

  bool Match(const Node& n, std::size_t pos, Continuation k) const {
    switch (n.kind) {
      case Kind::kSet:
        return pos < end_ && n.set.Matches(cps_[pos]) && k(pos + 1);
      case Kind::kSequence:
        return MatchSequence(n, 0, pos, k);
      case Kind::kAlternation:
        for (const Node& child : n.children) {
          if (Match(child, pos, k)) return true;
        }
        return false;
      case Kind::kRepeat:
        if (n.children[0].kind == Kind::kSet) return MatchRepeatedSet(n, pos, k);
        return MatchRepeat(n, 0, pos, k);
      case Kind::kLookahead: {
        const auto accept = [](std::size_t) { return true; };
        return Match(n.children[0], pos, accept) != n.negative && k(pos);
      }
    }
    return false;
  }

 private:
  bool MatchSequence(const Node& n, std::size_t i, std::size_t pos, Continuation k) const {
    if (i == n.children.size()) return k(pos);
    const auto rest = [&](std::size_t p) { return MatchSequence(n, i + 1, p, k); };
    return Match(n.children[i], pos, rest);
  }

  // Greedy: take as many as allowed, then give back one at a time.
  bool MatchRepeatedSet(const Node& n, std::size_t pos, Continuation k) const {
    const CharSet& set = n.children[0].set;
    const std::size_t limit =
        n.max < 0 ? end_ : std::min(end_, pos + static_cast<std::size_t>(n.max));
    std::size_t e = pos;
    while (e < limit && set.Matches(cps_[e])) ++e;
    const std::size_t least = pos + static_cast<std::size_t>(n.min);
    if (e < least) return false;
    for (std::size_t q = e;; --q) {
      if (k(q)) return true;
      if (q == least) return false;
    }
  }

  // A bounded repeat of a longer node (Compile ensures the bound), one recursion per iteration.
  bool MatchRepeat(const Node& n, int count, std::size_t pos, Continuation k) const {
    if (n.max < 0 || count < n.max) {
      // As in ECMAScript, an iteration that matched nothing does not count.
      const auto again = [&](std::size_t p) { return p != pos && MatchRepeat(n, count + 1, p, k); };
      if (Match(n.children[0], pos, again)) return true;
    }
    return count >= n.min && k(pos);
  }

  const std::vector<CodePointInfo>& cps_;
  std::size_t end_;
};

}  // namespace

SplitPattern::SplitPattern(std::string pattern, std::unique_ptr<Node> root)
    : pattern_(std::move(pattern)), root_(std::move(root)) {}
SplitPattern::SplitPattern(SplitPattern&&) noexcept = default;
SplitPattern& SplitPattern::operator=(SplitPattern&&) noexcept = default;
SplitPattern::~SplitPattern() = default;

SplitPattern SplitPattern::Compile(std::string_view pattern) {
  PatternParser parser(pattern);
  return SplitPattern(std::string(pattern), std::make_unique<Node>(parser.Parse()));
}

std::ptrdiff_t SplitPattern::MatchAt(const std::vector<CodePointInfo>& cps, std::size_t pos,
                                     std::size_t end) const {
  const Matcher matcher(cps, end);
  std::size_t match_end = 0;
  const auto record = [&](std::size_t p) {
    match_end = p;
    return true;
  };
  if (!matcher.Match(*root_, pos, record)) return -1;
  return static_cast<std::ptrdiff_t>(match_end - pos);
}

void SplitPattern::Split(const std::vector<CodePointInfo>& cps, std::size_t begin, std::size_t end,
                         std::vector<std::size_t>* ends) const {
  std::size_t word_start = begin;
  for (std::size_t pos = begin; pos < end;) {
    const std::ptrdiff_t length = MatchAt(cps, pos, end);
    if (length <= 0) {  // no match here (an empty match splits nothing)
      ++pos;
      continue;
    }
    if (pos > word_start) ends->push_back(pos);  // the text between two matches is a word too
    pos += static_cast<std::size_t>(length);
    ends->push_back(pos);
    word_start = pos;
  }
  if (end > word_start) ends->push_back(end);
}

}  // namespace grove
