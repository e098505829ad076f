// The regular expressions that byte-level BPE pre-tokenizers split text with, e.g. Qwen2's
//   (?:'[sS]|'[tT]|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|...
// compiled once and matched over code points.
//
// Semantics are those of llama.cpp's pre-tokenizer, the reference grove's tokenizers are checked
// against: ECMAScript matching (leftmost match, the first alternative that lets the rest match,
// greedy quantifiers with backtracking), each match a word and the text between two matches a word
// too. Character classes test Unicode general categories (\p{L}, \p{N}, \p{P}, \p{M}, \p{S}) and
// White_Space (\s). As in llama.cpp, which collapses every letter to one stand-in before running
// std::regex, \p{Lu}, \p{Ll}, \p{Lt}, \p{Lm} and \p{Lo} all mean any letter; the patterns written
// for it (Tekken's, GPT-4o's) test case with [^a-z] and [^A-Z] instead, which only ASCII fails.
//
// The syntax is the subset those patterns use: literals and escapes (\r \n \t \s \S \d \p{..}
// \P{..} and escaped punctuation), [...] classes with ranges and negation, ., groups (...) and
// (?:...), ASCII-case-insensitive groups (?i:...), lookahead (?=...) and (?!...), alternation, and
// the greedy quantifiers * + ? {n} {n,} {n,m}. Anything else (lazy quantifiers, backreferences,
// anchors, lookbehind, \b) is refused when the pattern is compiled, naming it.
//
// Matching never recurses once per character: a quantifier over one character (a class, or a
// lookahead-guarded class such as ((?=[\p{L}])[^a-z])) is a loop, and a quantifier over anything
// longer must have a bounded count, which Compile checks. So any input, however long, is safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace grove {

// What the classes of a pattern test about one code point.
struct CodePointInfo {
  int32_t cp = 0;        // the code point; negative for an ill-formed UTF-8 sequence
  uint8_t category = 0;  // a SplitCategory bit
  bool space = false;    // Unicode White_Space
};

// General-category groups, one bit each.
enum SplitCategory : uint8_t {
  kCategoryLetter = 1,
  kCategoryNumber = 2,
  kCategoryPunctuation = 4,
  kCategoryMark = 8,
  kCategorySymbol = 16,
  kCategorySeparator = 32,
  kCategoryOther = 64,  // control, format, private use, unassigned, ill-formed bytes
};

// Decodes UTF-8 and classifies each code point (ICU's tables). An ill-formed sequence, as ICU's
// U8_NEXT delimits it, is one code point of category "other", as U+FFFD would be.
void ClassifyCodePoints(std::string_view text, std::vector<CodePointInfo>* cps,
                        std::vector<std::size_t>* byte_offsets);

class SplitPattern {
 public:
  // Throws grove::Error naming the construct and its offset in the pattern.
  static SplitPattern Compile(std::string_view pattern);
  SplitPattern(SplitPattern&&) noexcept;
  SplitPattern& operator=(SplitPattern&&) noexcept;
  ~SplitPattern();

  // Splits cps[begin, end) into words: appends the end (exclusive) of each word to `ends`. Matches
  // never look outside [begin, end): lookahead past `end` sees the end of the text.
  void Split(const std::vector<CodePointInfo>& cps, std::size_t begin, std::size_t end,
             std::vector<std::size_t>* ends) const;

  // The length of the match that starts exactly at `pos`, or -1 if none does (for tests).
  std::ptrdiff_t MatchAt(const std::vector<CodePointInfo>& cps, std::size_t pos,
                         std::size_t end) const;

  const std::string& pattern() const { return pattern_; }

  struct Node;  // the compiled pattern's tree (split_pattern.cc)

 private:
  SplitPattern(std::string pattern, std::unique_ptr<Node> root);

  std::string pattern_;
  std::unique_ptr<Node> root_;
};

}  // namespace grove
