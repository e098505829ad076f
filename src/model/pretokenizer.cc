#include "model/pretokenizer.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <array>
#include <cstdint>

#include "base/error.h"

namespace grove {
namespace {

// The only properties the patterns test. They are exclusive (no code point is both a letter and
// white space), so one class per code point is enough. kNone is what lookahead past the end sees:
// it fails every class test, as the end of input fails every regex character class.
enum class CharClass : uint8_t { kNone, kLetter, kNumber, kSpace, kOther };

// \s is Unicode White_Space (what the HF tokenizers' regex engines use), \p{L} is L*, \p{N} is N*.
CharClass ClassifyWithIcu(UChar32 c) {
  if (u_isUWhiteSpace(c)) return CharClass::kSpace;
  switch (u_charType(c)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return CharClass::kLetter;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return CharClass::kNumber;
    default:
      return CharClass::kOther;
  }
}

// Most text is ASCII; a table avoids two ICU calls per character there.
CharClass Classify(UChar32 c) {
  static const std::array<CharClass, 128> kAscii = [] {
    std::array<CharClass, 128> table{};
    for (UChar32 i = 0; i < 128; ++i) table[i] = ClassifyWithIcu(i);
    return table;
  }();
  if (c < 0) return CharClass::kOther;  // an ill-formed byte sequence, treated as U+FFFD would be
  return c < 128 ? kAscii[c] : ClassifyWithIcu(c);
}

// The input decoded to code points, with lookahead that returns a sentinel past the end, and the
// emission of words as byte ranges. Positions below are code point indices.
class CodePointSplitter {
 public:
  // Past the end; distinct from U_SENTINEL (-1), which marks ill-formed bytes.
  static constexpr UChar32 kEnd = -2;

  CodePointSplitter(std::string_view text, std::vector<PreTokenizerWord>* words) : words_(words) {
    const auto* s = reinterpret_cast<const uint8_t*>(text.data());
    const auto length = static_cast<int64_t>(text.size());
    cps_.reserve(text.size());
    classes_.reserve(text.size());
    offsets_.reserve(text.size() + 1);
    for (int64_t i = 0; i < length;) {
      offsets_.push_back(static_cast<std::size_t>(i));
      UChar32 c;
      U8_NEXT(s, i, length, c);
      cps_.push_back(c);
      classes_.push_back(Classify(c));
    }
    offsets_.push_back(text.size());
    words_->clear();
  }

  std::size_t size() const { return cps_.size(); }
  UChar32 cp(std::size_t i) const { return i < cps_.size() ? cps_[i] : kEnd; }
  CharClass cls(std::size_t i) const {
    return i < classes_.size() ? classes_[i] : CharClass::kNone;
  }
  bool IsNewline(std::size_t i) const { return cp(i) == '\r' || cp(i) == '\n'; }

  // Ends the current word at code point `end` (exclusive) and returns `end`.
  std::size_t Emit(std::size_t end) {
    if (end > word_start_) words_->push_back({offsets_[word_start_], offsets_[end]});
    word_start_ = end;
    return end;
  }

  // 's|'t|'re|'ve|'m|'ll|'d at `pos`, optionally ASCII case-insensitive (Llama-3's (?i:...));
  // returns the match length in code points, 0 for none. Full Unicode case folding would also let
  // U+017F (ſ) match 's'; like llama.cpp we only fold ASCII.
  std::size_t ContractionLength(std::size_t pos, bool ignore_case) const {
    if (cp(pos) != '\'') return 0;
    auto fold = [&](std::size_t i) {
      UChar32 c = cp(i);
      return ignore_case && c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
    };
    UChar32 a = fold(pos + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    UChar32 b = fold(pos + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  // The whitespace alternatives of both patterns, tried at `pos` when everything else failed:
  // `\s*[\r\n]+` (Llama-3 only), then `\s+(?!\S)`, then `\s+`. Returns the end of the match.
  std::size_t MatchWhitespace(std::size_t pos, bool newline_alternative) const {
    std::size_t end = pos;
    std::size_t after_last_newline = 0;
    while (cls(end) == CharClass::kSpace) {
      if (IsNewline(end)) after_last_newline = end + 1;
      ++end;
    }
    // \s*[\r\n]+ : greedy \s* backtracks to the last newline of the run.
    if (newline_alternative && after_last_newline > 0) return after_last_newline;
    // \s+(?!\S) : a run followed by a non-space leaves its last space to prefix the next word.
    if (end - pos > 1 && end < size()) return end - 1;
    // \s+
    if (end > pos) return end;
    return pos + 1;  // no alternative matched: a one-character word (unreachable for valid classes)
  }

 private:
  std::vector<PreTokenizerWord>* words_;
  std::vector<UChar32> cps_;
  std::vector<CharClass> classes_;
  std::vector<std::size_t> offsets_;  // byte offset of each code point, then text.size()
  std::size_t word_start_ = 0;
};

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void SplitGpt2(CodePointSplitter& s) {
  for (std::size_t pos = 0; pos < s.size();) {
    if (std::size_t n = s.ContractionLength(pos, /*ignore_case=*/false)) {
      pos = s.Emit(pos + n);
      continue;
    }
    // ` ?\p{L}+`, ` ?\p{N}+` and ` ?[^\s\p{L}\p{N}]+` all read: an optional space, then a run of
    // one class other than white space.
    std::size_t run = pos + (s.cp(pos) == ' ' ? 1 : 0);
    const CharClass run_class = s.cls(run);
    if (run_class == CharClass::kLetter || run_class == CharClass::kNumber ||
        run_class == CharClass::kOther) {
      while (s.cls(run) == run_class) ++run;
      pos = s.Emit(run);
      continue;
    }
    pos = s.Emit(s.MatchWhitespace(pos, /*newline_alternative=*/false));
  }
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
void SplitLlama3(CodePointSplitter& s) {
  for (std::size_t pos = 0; pos < s.size();) {
    if (std::size_t n = s.ContractionLength(pos, /*ignore_case=*/true)) {
      pos = s.Emit(pos + n);
      continue;
    }
    const CharClass here = s.cls(pos);
    // [^\r\n\p{L}\p{N}]?\p{L}+ : letters, optionally preceded by one character that is not a
    // newline, letter or digit (usually a space, but also punctuation: "(word" is one word).
    if (!s.IsNewline(pos) && here != CharClass::kNumber &&
        (here == CharClass::kLetter || s.cls(pos + 1) == CharClass::kLetter)) {
      std::size_t end = pos + 1;
      while (s.cls(end) == CharClass::kLetter) ++end;
      pos = s.Emit(end);
      continue;
    }
    // \p{N}{1,3} : numbers in groups of at most three digits, left to right.
    if (here == CharClass::kNumber) {
      std::size_t end = pos;
      while (s.cls(end) == CharClass::kNumber && end - pos < 3) ++end;
      pos = s.Emit(end);
      continue;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*` : punctuation keeps the newlines that follow it.
    std::size_t run = pos + (s.cp(pos) == ' ' ? 1 : 0);
    if (s.cls(run) == CharClass::kOther) {
      while (s.cls(run) == CharClass::kOther) ++run;
      while (s.IsNewline(run)) ++run;
      pos = s.Emit(run);
      continue;
    }
    pos = s.Emit(s.MatchWhitespace(pos, /*newline_alternative=*/true));
  }
}

}  // namespace

PreTokenizerKind PreTokenizerFromName(std::string_view name) {
  if (name.empty() || name == "default" || name == "gpt2" || name == "gpt-2") {
    return PreTokenizerKind::kGpt2;
  }
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe") {
    return PreTokenizerKind::kLlama3;
  }
  Fail("tokenizer: tokenizer.ggml.pre = '", name,
       "' is not supported (supported: 'default', 'gpt2', 'gpt-2', 'llama3', 'llama-v3', "
       "'llama-bpe')");
}

std::string_view PreTokenizerName(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::kGpt2:
      return "gpt2";
    case PreTokenizerKind::kLlama3:
      return "llama3";
  }
  return "?";
}

void PreTokenize(PreTokenizerKind kind, std::string_view text,
                 std::vector<PreTokenizerWord>* words) {
  CodePointSplitter splitter(text, words);
  switch (kind) {
    case PreTokenizerKind::kGpt2:
      SplitGpt2(splitter);
      break;
    case PreTokenizerKind::kLlama3:
      SplitLlama3(splitter);
      break;
  }
}

}  // namespace grove
