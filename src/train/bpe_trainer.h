// Byte-level BPE training (GPT-2 style) and its GGUF form.
//
// The text is split into pre-tokens by the same pre-tokenizer the encoder uses
// (tokenize/pretokenizer.h), so merges never cross a pre-token boundary and encoding the training
// text reproduces the training segmentation. Each distinct pre-token is stored once with its count;
// merges then repeat:
//   take the most frequent adjacent pair (ties: the smaller left id, then the smaller right id);
//   give the concatenation a token (reusing it if the same bytes were already made another way);
//   rewrite only the pre-tokens that contain the pair, adjusting the counts of the neighbouring
//   pairs.
// A max-heap with lazy deletion finds the best pair, and an index from each pair to the pre-tokens
// that contain it limits each merge to the words it touches, so training costs about the total size
// of the rewritten words rather than a full recount of every pair per merge.
// Training has no randomness: the same text and options give the same vocabulary, byte for byte.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/pretokenizer.h"
#include "tokenize/tokenizer.h"

namespace grove {

class GgufWriter;

struct BpeTrainerOptions {
  // Total vocabulary: 256 byte tokens + learned merges + special tokens.
  int32_t vocab_size = 3072;
  // Control tokens appended after the learned tokens, e.g. end-of-text between documents. The first
  // is also BOS and EOS.
  std::vector<std::string> special_tokens = {"<|endoftext|>"};
  // A name PreTokenizer::ForName accepts (tokenize/pretokenizer.h).
  std::string pre_tokenizer = "gpt-2";
};

inline constexpr int32_t kBpeMaxVocab = 65536;

struct BpeVocab {
  // As stored in tokenizer.ggml.tokens: each byte by its GPT-2 stand-in character ("Ġ" for space).
  std::vector<std::string> tokens;
  std::vector<TokenType> types;
  std::vector<std::string> merges;      // "left right", rank = index
  int32_t eos = -1;                     // also BOS; -1 without special tokens
  std::string pre_tokenizer = "gpt-2";  // as written to tokenizer.ggml.pre
};

struct BpeTrainStats {
  int64_t pre_tokens = 0;  // pre-tokens in the text
  int64_t distinct_pre_tokens = 0;
  int64_t merges = 0;
};

// Learns a vocabulary from the texts (their pre-token counts are summed). Throws grove::Error when
// the vocab size is out of range ([256 + specials + 1, kBpeMaxVocab]), a special token is empty or
// repeated, or the text has too few distinct pairs to reach the requested size.
BpeVocab TrainBpe(std::span<const std::string_view> texts, const BpeTrainerOptions& options,
                  BpeTrainStats* stats = nullptr);

// Adds the tokenizer.ggml.* keys (model "gpt2", pre "gpt-2", tokens, token_type, merges, BOS/EOS
// ids, add_bos_token false) so that model files exported later carry the same tokenizer.
void AddBpeTokenizerMetadata(const BpeVocab& vocab, GgufWriter* writer);

// Writes a vocab-only GGUF (tokenizer keys and general.name, no tensors).
void WriteBpeTokenizerGguf(const BpeVocab& vocab, const std::string& path);

}  // namespace grove
