#include "tokenize/pretokenizer.h"

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace grove {
namespace {

// The patterns, as llama.cpp (src/llama-vocab.cpp) writes them. Where a tokenizer.json pattern
// uses what std::regex lacks, llama.cpp adapts it: (?i:'s|...) becomes (?:'[sS]|...), and the
// \p{Lu}/\p{Ll} case tests of Tekken and GPT-4o become lookahead-guarded [^a-z] / [^A-Z].
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr std::string_view kContractions =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))";
constexpr std::string_view kLlama3Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct PreTokenizerSpec {
  std::vector<std::string_view> names;  // the first is written to files
  std::vector<std::string> patterns;
  bool ignore_merges = false;
  bool adds_bos = false;
};

std::string Cat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (std::string_view p : parts) s += p;
  return s;
}

// One row per pre-tokenizer family of llama.cpp that grove supports. Names and patterns are
// llama.cpp's (facts about its file format), the flags its ignore_merges / add_bos.
const std::vector<PreTokenizerSpec>& Table() {
  static const std::vector<PreTokenizerSpec> table = {
      {{"default", ""},
       {R"([\p{P}\$\+<=>\^~\|]+)", std::string(kGpt2Pattern), R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {{"gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "exaone4", "gigachat", "mellum"},
       {std::string(kGpt2Pattern)}},
      {{"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {std::string(kLlama3Pattern)},
       /*ignore_merges=*/true,
       /*adds_bos=*/true},
      {{"dbrx", "smaug-bpe"}, {std::string(kLlama3Pattern)}},
      {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"}, {std::string(kQwen2Pattern)}},
      {{"qwen35"},
       {Cat(
           {kContractions,
            R"(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"})}},
      {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"},
       {R"(\p{N})", std::string(kGpt2Pattern)}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", std::string(kGpt2Pattern), "[0-9][0-9][0-9]"}},
      {{"tekken"},
       {R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       /*ignore_merges=*/true,
       /*adds_bos=*/true},
      {{"gpt-4o", "llama4", "kanana2"},
       {Cat({R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+)", kContractions,
             R"(?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*)", kContractions,
             R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"})}},
      {{"deepseek-v3"},
       {R"(\p{N}{1,3})", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
        "\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
      {{"deepseek-coder"},
       {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
        R"(\p{N})"}},
      {{"poro-chat", "bloom", "gpt3-finnish"},
       {" ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"}},
  };
  return table;
}

// Hand-written matchers for the commonest patterns. Each follows its regex alternative by
// alternative over [begin, end) and appends word ends; cps past `end` are never read.
class FastSplitter {
 public:
  FastSplitter(const std::vector<CodePointInfo>& cps, std::size_t begin, std::size_t end,
               std::vector<std::size_t>* ends)
      : cps_(cps), begin_(begin), end_(end), ends_(ends) {}

  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
  void Gpt2() {
    for (std::size_t pos = begin_; pos < end_;) {
      if (std::size_t n = ContractionLength(pos, /*ignore_case=*/false)) {
        pos = Emit(pos + n);
        continue;
      }
      // ` ?\p{L}+`, ` ?\p{N}+` and ` ?[^\s\p{L}\p{N}]+` all read: an optional space, then a run
      // of one class other than white space.
      std::size_t run = pos + (cp(pos) == ' ' ? 1 : 0);
      const Class run_class = cls(run);
      if (run_class == Class::kLetter || run_class == Class::kNumber ||
          run_class == Class::kOther) {
        while (cls(run) == run_class) ++run;
        pos = Emit(run);
        continue;
      }
      pos = Emit(MatchWhitespace(pos, /*newline_alternative=*/false));
    }
  }

  // (?:'[sS]|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  // \s*[\r\n]+|\s+(?!\S)|\s+   (Llama 3: max_digits 3; Qwen2: 1)
  void Llama3(std::size_t max_digits) {
    for (std::size_t pos = begin_; pos < end_;) {
      if (std::size_t n = ContractionLength(pos, /*ignore_case=*/true)) {
        pos = Emit(pos + n);
        continue;
      }
      const Class here = cls(pos);
      // [^\r\n\p{L}\p{N}]?\p{L}+ : letters, optionally preceded by one character that is not a
      // newline, letter or digit (usually a space, but also punctuation: "(word" is one word).
      if (!IsNewline(pos) && here != Class::kNumber &&
          (here == Class::kLetter || cls(pos + 1) == Class::kLetter)) {
        std::size_t end = pos + 1;
        while (cls(end) == Class::kLetter) ++end;
        pos = Emit(end);
        continue;
      }
      // \p{N}{1,3} : numbers in groups of at most three digits, left to right.
      if (here == Class::kNumber) {
        std::size_t end = pos;
        while (cls(end) == Class::kNumber && end - pos < max_digits) ++end;
        pos = Emit(end);
        continue;
      }
      // ` ?[^\s\p{L}\p{N}]+[\r\n]*` : punctuation keeps the newlines that follow it.
      std::size_t run = pos + (cp(pos) == ' ' ? 1 : 0);
      if (cls(run) == Class::kOther) {
        while (cls(run) == Class::kOther) ++run;
        while (IsNewline(run)) ++run;
        pos = Emit(run);
        continue;
      }
      pos = Emit(MatchWhitespace(pos, /*newline_alternative=*/true));
    }
  }

 private:
  // kNone is what lookahead past the end sees: it fails every class test.
  enum class Class : uint8_t { kNone, kLetter, kNumber, kSpace, kOther };

  int32_t cp(std::size_t i) const { return i < end_ ? cps_[i].cp : -2; }
  Class cls(std::size_t i) const {
    if (i >= end_) return Class::kNone;
    const CodePointInfo& c = cps_[i];
    if (c.space) return Class::kSpace;
    if (c.category == kCategoryLetter) return Class::kLetter;
    if (c.category == kCategoryNumber) return Class::kNumber;
    return Class::kOther;
  }
  bool IsNewline(std::size_t i) const { return cp(i) == '\r' || cp(i) == '\n'; }

  std::size_t Emit(std::size_t end) {
    ends_->push_back(end);
    return end;
  }

  // 's|'t|'re|'ve|'m|'ll|'d at `pos`, optionally ASCII case-insensitive; the match length in code
  // points, 0 for none.
  std::size_t ContractionLength(std::size_t pos, bool ignore_case) const {
    if (cp(pos) != '\'') return 0;
    auto fold = [&](std::size_t i) {
      const int32_t c = cp(i);
      return ignore_case && c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
    };
    const int32_t a = fold(pos + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    const int32_t b = fold(pos + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  // The whitespace alternatives, tried at `pos` when everything else failed: `\s*[\r\n]+`
  // (Llama 3 only), then `\s+(?!\S)`, then `\s+`. Returns the end of the match.
  std::size_t MatchWhitespace(std::size_t pos, bool newline_alternative) const {
    std::size_t end = pos;
    std::size_t after_last_newline = 0;
    while (cls(end) == Class::kSpace) {
      if (IsNewline(end)) after_last_newline = end + 1;
      ++end;
    }
    // \s*[\r\n]+ : greedy \s* backtracks to the last newline of the run.
    if (newline_alternative && after_last_newline > 0) return after_last_newline;
    // \s+(?!\S) : a run followed by a non-space leaves its last space to prefix the next word.
    if (end - pos > 1 && end < end_) return end - 1;
    // \s+ (or, for GPT-2's pattern, the unmatched space that becomes a word of its own)
    if (end > pos) return end;
    return pos + 1;  // no alternative matched: a one-character word
  }

  const std::vector<CodePointInfo>& cps_;
  std::size_t begin_;
  std::size_t end_;
  std::vector<std::size_t>* ends_;
};

enum class FastPath { kNone, kGpt2, kLlama3, kQwen2 };

FastPath FastPathFor(std::string_view pattern) {
  if (pattern == kGpt2Pattern) return FastPath::kGpt2;
  if (pattern == kLlama3Pattern) return FastPath::kLlama3;
  if (pattern == kQwen2Pattern) return FastPath::kQwen2;
  return FastPath::kNone;
}

}  // namespace

struct PreTokenizer::Stage {
  SplitPattern pattern;
  FastPath fast;
};

PreTokenizer::PreTokenizer(std::string name, std::vector<std::string> patterns, bool ignore_merges,
                           bool adds_bos)
    : name_(std::move(name)), ignore_merges_(ignore_merges), adds_bos_(adds_bos) {
  for (const std::string& p : patterns) {
    stages_.push_back({SplitPattern::Compile(p), FastPathFor(p)});
  }
}
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

const PreTokenizer& PreTokenizer::ForName(std::string_view name) {
  // Each compiled on its first use, and shared: a PreTokenizer is immutable. Compiling every one
  // at the first use of any was a tenth of building a tokenizer (issue 30).
  static std::mutex mutex;
  static std::vector<std::unique_ptr<const PreTokenizer>> compiled(Table().size());
  for (std::size_t i = 0; i < Table().size(); ++i) {
    const PreTokenizerSpec& spec = Table()[i];
    for (std::string_view n : spec.names) {
      if (n != name) continue;
      const std::lock_guard<std::mutex> lock(mutex);
      if (!compiled[i]) {
        compiled[i] = std::make_unique<const PreTokenizer>(
            std::string(spec.names[0]), spec.patterns, spec.ignore_merges, spec.adds_bos);
      }
      return *compiled[i];
    }
  }
  std::string supported;
  for (const std::string& n : SupportedNames()) {
    if (n.empty()) continue;
    if (!supported.empty()) supported += ", ";
    supported += "'" + n + "'";
  }
  Fail("tokenizer: tokenizer.ggml.pre = '", name, "' is not supported (supported: ", supported,
       ")");
}

std::vector<std::string> PreTokenizer::SupportedNames() {
  std::vector<std::string> names;
  for (const PreTokenizerSpec& spec : Table()) {
    for (std::string_view n : spec.names) names.emplace_back(n);
  }
  return names;
}

void PreTokenizer::Split(std::string_view text, std::vector<PreTokenizerWord>* words) const {
  SplitImpl(text, /*allow_fast=*/true, words);
}

void PreTokenizer::SplitWithPatterns(std::string_view text,
                                     std::vector<PreTokenizerWord>* words) const {
  SplitImpl(text, /*allow_fast=*/false, words);
}

void PreTokenizer::SplitImpl(std::string_view text, bool allow_fast,
                             std::vector<PreTokenizerWord>* words) const {
  std::vector<CodePointInfo> cps;
  std::vector<std::size_t> offsets;
  ClassifyCodePoints(text, &cps, &offsets);
  // Word ends in code points; each stage splits every word of the one before.
  std::vector<std::size_t> ends;
  if (!cps.empty()) ends.push_back(cps.size());
  std::vector<std::size_t> next;
  for (const Stage& stage : stages_) {
    next.clear();
    std::size_t begin = 0;
    for (std::size_t end : ends) {
      FastSplitter fast(cps, begin, end, &next);
      switch (allow_fast ? stage.fast : FastPath::kNone) {
        case FastPath::kGpt2:
          fast.Gpt2();
          break;
        case FastPath::kLlama3:
          fast.Llama3(3);
          break;
        case FastPath::kQwen2:
          fast.Llama3(1);
          break;
        case FastPath::kNone:
          stage.pattern.Split(cps, begin, end, &next);
          break;
      }
      begin = end;
    }
    ends.swap(next);
  }
  words->clear();
  std::size_t begin = 0;
  for (std::size_t end : ends) {
    words->push_back({offsets[begin], offsets[end]});
    begin = end;
  }
}

}  // namespace grove
