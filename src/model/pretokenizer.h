// Pre-tokenizers for byte-level BPE: split text into the "words" that BPE merges never cross.
//
// Each model family defines its split with a regular expression over Unicode categories (\p{L},
// \p{N}, \s). std::regex cannot express those, and a general Unicode regex engine would be a large
// dependency for two fixed patterns, so each pattern is a hand-written matcher over code points
// that follows the regex alternative by alternative (the same approach llama.cpp takes in
// unicode.cpp). Categories come from ICU, so they follow the installed libicu's Unicode version.
//
// Invalid UTF-8 is not an error: each ill-formed subsequence (as ICU's U8_NEXT delimits it) counts
// as one code point of class "other", as U+FFFD would, but the words keep the original bytes, so
// BPE still encodes them through its byte tokens and decoding gives back the exact input.
// (llama.cpp replaces such bytes with U+FFFD before encoding, so it cannot round-trip them.)
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace grove {

enum class PreTokenizerKind {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  // \s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
};

// Maps the value of `tokenizer.ggml.pre` to a pre-tokenizer. An empty name (key absent), "default",
// "gpt2" and "gpt-2" select GPT-2; "llama3", "llama-v3" and "llama-bpe" select Llama-3. Anything
// else throws grove::Error naming the value and listing the supported ones.
PreTokenizerKind PreTokenizerFromName(std::string_view name);
std::string_view PreTokenizerName(PreTokenizerKind kind);

// A word is the byte range [begin, end) of the input.
struct PreTokenizerWord {
  std::size_t begin = 0;
  std::size_t end = 0;
};

// Splits `text` into consecutive words that together cover it exactly; `words` is cleared first.
void PreTokenize(PreTokenizerKind kind, std::string_view text,
                 std::vector<PreTokenizerWord>* words);

}  // namespace grove
