// Internal to the tokenizer: the vocabulary shared by both models, and the interface each model
// (SentencePiece BPE, byte-level BPE) implements. Not included outside src/tokenize/tokenizer*.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/tokenizer.h"

namespace grove {

class GgufFile;

// Text -> id over a vocabulary's texts, which the vocabulary keeps: open addressing over ids, at
// most half full, built once at load and read-only after. A std::unordered_map of the texts cost a
// node and a copy of every text, 40% of building a tokenizer of 8,000 tokens (itself a fifth of a
// 16-token grove run's load, issue 30).
class TokenTextIndex {
 public:
  // Duplicate texts map to the last id, as in llama.cpp, so both pick the same token for a string.
  void Build(const std::vector<std::string>& texts);
  // -1 when no text equals `text`.
  int32_t Find(std::string_view text, const std::vector<std::string>& texts) const;

 private:
  std::vector<int32_t> slots_;  // ids; -1: empty
  std::size_t mask_ = 0;        // slots_.size() - 1 (a power of two)
};

struct TokenizerVocab {
  std::string model;               // "llama" or "gpt2"
  std::vector<std::string> texts;  // as stored in tokenizer.ggml.tokens
  std::vector<TokenType> types;
  std::vector<float> scores;        // empty when the file has none
  std::vector<std::string> pieces;  // decoded bytes per token, filled by the model at load
  TokenTextIndex ids;               // text -> id (the last, if repeated)

  int32_t bos = -1;
  int32_t eos = -1;
  int32_t unk = -1;
  bool add_bos = false;
  std::vector<uint8_t> is_eog;  // per token

  // Control, unknown and user-defined tokens with non-empty text, longest text first (ties: lower
  // id): the order in which Encode splits them out of the text.
  std::vector<int32_t> special_by_length;

  int32_t n_tokens() const { return static_cast<int32_t>(texts.size()); }
  // -1 when no token has exactly this text.
  int32_t Find(std::string_view text) const { return ids.Find(text, texts); }
};

// Reads the keys both models share (tokens, types, scores, special ids, EOG set, add_bos) and
// validates them; throws grove::Error naming the key.
std::unique_ptr<TokenizerVocab> LoadTokenizerVocab(const GgufFile& gguf);

class TokenizerModel {
 public:
  virtual ~TokenizerModel() = default;
  // Appends the tokens of `text`, a run that holds no special token. `after_special` is true at the
  // start of the input and right after a special token (where SentencePiece adds its space prefix).
  virtual void Encode(std::string_view text, bool after_special,
                      std::vector<int32_t>* out) const = 0;
  // Whether Decode removes one leading space from the first piece of text (the space prefix).
  virtual bool strips_leading_space() const = 0;
};

// Both read their own keys, fill vocab->pieces, and keep a reference to *vocab.
std::unique_ptr<TokenizerModel> MakeSpmModel(const GgufFile& gguf, TokenizerVocab* vocab);
std::unique_ptr<TokenizerModel> MakeBpeModel(const GgufFile& gguf, TokenizerVocab* vocab);

}  // namespace grove
