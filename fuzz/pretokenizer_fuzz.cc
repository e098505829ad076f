// libFuzzer target for the pre-tokenizers: the first byte of an input picks one of the names
// `tokenizer.ggml.pre` may hold, the rest is the text (any bytes: invalid UTF-8 is not an error).
// Its words must cover the text exactly, in order, none empty, and the hand-written matchers of the
// common patterns must split exactly as the general pattern matcher does (pretokenizer.h promises
// both; the tests check them on chosen texts, this on whatever the fuzzer makes). A violation
// aborts with the name and the first differing word. Seeds: tests/fuzz/corpus/pretokenizer/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/pretokenizer.h"

namespace {

[[noreturn]] void Violation(const std::string& name, const char* what, std::size_t index,
                            std::size_t begin, std::size_t end) {
  std::fprintf(stderr, "pretokenizer '%s': %s (word %zu: [%zu, %zu))\n", name.c_str(), what, index,
               begin, end);
  std::abort();
}

void CheckCovers(const std::string& name, std::string_view text,
                 const std::vector<grove::PreTokenizerWord>& words) {
  std::size_t at = 0;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (words[i].begin != at)
      Violation(name, "words not consecutive", i, words[i].begin, words[i].end);
    if (words[i].end <= words[i].begin)
      Violation(name, "empty word", i, words[i].begin, words[i].end);
    at = words[i].end;
  }
  if (at != text.size())
    Violation(name, "words do not reach the end", words.size(), at, text.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::string> kNames = grove::PreTokenizer::SupportedNames();
  if (size == 0) return 0;
  const std::string& name = kNames[data[0] % kNames.size()];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const grove::PreTokenizer& pre = grove::PreTokenizer::ForName(name);
  std::vector<grove::PreTokenizerWord> fast;
  std::vector<grove::PreTokenizerWord> general;
  pre.Split(text, &fast);
  CheckCovers(name, text, fast);
  pre.SplitWithPatterns(text, &general);
  CheckCovers(name, text, general);
  for (std::size_t i = 0; i < fast.size() && i < general.size(); ++i) {
    if (fast[i].end != general[i].end) {
      Violation(name, "hand-written matcher differs from the pattern", i, fast[i].begin,
                fast[i].end);
    }
  }
  if (fast.size() != general.size()) {
    Violation(name, "hand-written matcher gives another word count", fast.size(), 0,
              general.size());
  }
  return 0;
}
