// Pre-tokenizers for byte-level BPE: split text into the "words" that BPE merges never cross.
//
// Each vocabulary names its pre-tokenizer in `tokenizer.ggml.pre` ("llama-bpe", "qwen2", "tekken",
// "deepseek-v3", ...). A pre-tokenizer is data: a list of regular expressions (split_pattern.h)
// applied one after another, each splitting every word the previous one produced (matches and the
// text between them both become words), plus two flags. The table in pretokenizer.cc spells each
// family's patterns exactly as llama.cpp does, so grove splits as llama.cpp does, including where
// llama.cpp adapts a Hugging Face pattern for std::regex; the tests compare the two on real
// vocabularies. The three patterns most vocabularies use (GPT-2's, Llama 3's, Qwen2's) also have
// hand-written matchers, tested equal to the general one, because tokenizing a long prompt with
// them is several times faster.
//
// Invalid UTF-8 is not an error: each ill-formed subsequence (as ICU's U8_NEXT delimits it) counts
// as one code point of category "symbol", as U+FFFD would, but the words keep the original bytes,
// so BPE still encodes them through its byte tokens and decoding gives back the exact input.
// (llama.cpp replaces such bytes with U+FFFD before encoding, so it cannot round-trip them.)
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/split_pattern.h"

namespace grove {

// A word is the byte range [begin, end) of the input.
struct PreTokenizerWord {
  std::size_t begin = 0;
  std::size_t end = 0;
};

class PreTokenizer {
 public:
  // The pre-tokenizer `tokenizer.ggml.pre` names. An empty name (the key absent) is llama.cpp's
  // "default". Anything not in the table throws grove::Error naming the value and listing the
  // supported names.
  static const PreTokenizer& ForName(std::string_view name);
  // Every name ForName accepts, in table order.
  static std::vector<std::string> SupportedNames();

  // The name as written to GGUF files (the first spelling of the family).
  const std::string& name() const { return name_; }
  // A word that is itself a token is emitted whole, even where the merges would have split it
  // differently (tokenizer.json's `ignore_merges`; Llama 3, Tekken).
  bool ignore_merges() const { return ignore_merges_; }
  // Whether encoding adds BOS when the file's `tokenizer.ggml.add_bos_token` does not say.
  bool adds_bos() const { return adds_bos_; }

  // Splits `text` into consecutive words that together cover it exactly; `words` is cleared first.
  void Split(std::string_view text, std::vector<PreTokenizerWord>* words) const;

  // The same split with only the general pattern matcher, never a hand-written one (for tests).
  void SplitWithPatterns(std::string_view text, std::vector<PreTokenizerWord>* words) const;

  struct Stage;
  PreTokenizer(std::string name, std::vector<std::string> patterns, bool ignore_merges,
               bool adds_bos);
  PreTokenizer(PreTokenizer&&) noexcept;
  ~PreTokenizer();

 private:
  void SplitImpl(std::string_view text, bool allow_fast,
                 std::vector<PreTokenizerWord>* words) const;

  std::string name_;
  std::vector<Stage> stages_;
  bool ignore_merges_ = false;
  bool adds_bos_ = false;
};

}  // namespace grove
