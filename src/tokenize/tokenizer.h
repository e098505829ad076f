// Tokenizers read from GGUF metadata: SentencePiece-style BPE (`tokenizer.ggml.model = "llama"`)
// and byte-level BPE (`"gpt2"`), both token-for-token compatible with llama.cpp on its test
// vectors.
//
// Encoding splits the text around special tokens first (see Encode), then hands each ordinary run
// to the model-specific tokenizer (tokenizer_spm.cc, tokenizer_bpe.cc). Decoding concatenates
// per-token byte strings ("pieces") computed once at load, so it allocates only the result.
//
// Metadata read (missing optional keys fall back as noted):
//   tokenizer.ggml.model         "llama" | "gpt2" (required)
//   tokenizer.ggml.tokens        token texts as stored (required, non-empty)
//   tokenizer.ggml.scores        merge priorities (required for "llama"; length must match)
//   tokenizer.ggml.token_type    1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte;
//                                0 ("undefined") reads as normal; absent: all normal, except that
//                                "llama" marks tokens spelled <0xXX> as bytes
//   tokenizer.ggml.merges        "left right" pairs, rank = index (required for "gpt2")
//   tokenizer.ggml.pre           pre-tokenizer for "gpt2" (see pretokenizer.h)
//   tokenizer.ggml.bos_token_id  absent: the token "<s>" ("llama") or "<|endoftext|>" ("gpt2"),
//                                -1 if there is no such token; a negative value also means none
//   tokenizer.ggml.eos_token_id  absent: "</s>" or "<|endoftext|>", as for BOS
//   tokenizer.ggml.unknown_token_id           absent: the first token of type unknown, else -1
//   tokenizer.ggml.eot_token_id, .eom_token_id  added to the end-of-generation set
//   tokenizer.ggml.add_bos_token              default true for "llama" and for the Llama-3
//                                             pre-tokenizers, false for other "gpt2" vocabs
//   tokenizer.ggml.add_space_prefix           "llama" only; default true
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace grove {

class GgufFile;
struct TokenizerVocab;
class TokenizerModel;

// Token types as numbered in `tokenizer.ggml.token_type` (llama.cpp's llama_token_type).
enum class TokenType : uint8_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // BOS, EOS, chat markers: never produced from plain text, decode to nothing
  kUserDefined = 4,  // added tokens: always split out of the text, decode to their text
  kUnused = 5,
  kByte = 6,  // SentencePiece byte fallback <0xXX>
};

class Tokenizer {
 public:
  // Reads and validates the vocabulary. Throws grove::Error naming the offending key (and index).
  static std::unique_ptr<Tokenizer> FromGguf(const GgufFile& gguf);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Encodes text; add_bos prepends BOS when the vocab has one. Empty text gives no tokens (or BOS).
  //
  // Before the model sees the text, the texts of user-defined tokens, and with parse_special also
  // those of control and unknown tokens (e.g. "<|eot_id|>", "<s>"), are split out and emitted as
  // their ids. As in llama.cpp, longer token texts are split out first, each at every occurrence.
  // The "llama" model adds its space prefix at the start of the text and after every special token
  // it splits out.
  //
  // Text need not be valid UTF-8: ill-formed bytes are encoded through byte tokens and come back
  // unchanged from Decode (the vocab permitting; see the model files).
  std::vector<int32_t> Encode(std::string_view text, bool add_bos,
                              bool parse_special = false) const;

  // Decodes a whole sequence to bytes (the exact bytes encoded, so not always valid UTF-8; use
  // TokenStreamDecoder when the output must be). Control, unknown and unused tokens decode to
  // nothing. For "llama", the space prefix that encoding added is removed: the first piece of text,
  // if it comes from a normal token and starts with a space, loses that space, whether or not BOS
  // precedes it (sentencepiece's DecodeIds; llama.cpp keeps the space after BOS). So
  // Decode(Encode(x)) == x, except that "llama" decodes a literal U+2581 ("▁") in the input as a
  // space: SentencePiece's escaping cannot tell the two apart.
  // Throws grove::Error naming the position and id when an id is out of range.
  std::string Decode(std::span<const int32_t> tokens) const;

  // The vocab string as stored ("▁Hello", "Ġworld", "<0x0A>"), for `grove tokenize` and debugging.
  std::string TokenText(int32_t id) const;
  // The bytes the token contributes to decoded text, without the start-of-text space removal.
  std::string_view TokenPiece(int32_t id) const;
  TokenType token_type(int32_t id) const;

  int32_t n_vocab() const;
  // A hash of every token's text, in id order (base/fnv1a.h): what files of token ids (a suffix
  // store) are checked against.
  uint64_t Fingerprint() const;
  int32_t bos() const;  // -1 if none
  int32_t eos() const;  // -1 if none
  int32_t unk() const;  // -1 if none
  bool add_bos_by_default() const;
  // EOS, EOT/EOM from metadata, and the tokens named <|eot_id|>, <|eom_id|>, <|end_of_text|>,
  // <|endoftext|>, <|im_end|>, <|end|>, <end_of_turn> when the vocab has them.
  bool IsEndOfGeneration(int32_t id) const;
  std::string_view model_name() const;  // "llama" or "gpt2"

 private:
  friend class TokenStreamDecoder;
  Tokenizer(std::unique_ptr<TokenizerVocab> vocab, std::unique_ptr<TokenizerModel> model);
  // Throws naming the id (and its position in the sequence, when >= 0) unless 0 <= id < n_vocab.
  void CheckId(int32_t id, int64_t position = -1) const;

  std::unique_ptr<const TokenizerVocab> vocab_;
  // Refers to *vocab_, so it is declared after it (and destroyed before it).
  std::unique_ptr<const TokenizerModel> model_;
};

// Decodes one token at a time (generation output) and returns only complete UTF-8: bytes of a
// character split across tokens (byte-fallback tokens, byte-level BPE) are held back until the
// token that completes them arrives. Ill-formed bytes come out as U+FFFD, so every returned string
// is valid UTF-8. The stream is taken to continue earlier text (the prompt), so no leading space is
// removed unless strip_leading_space asks for Decode's start-of-text rule.
class TokenStreamDecoder {
 public:
  explicit TokenStreamDecoder(const Tokenizer& tok, bool strip_leading_space = false);

  // Throws grove::Error when the id is out of range (and keeps its state).
  std::string Push(int32_t token);
  // Returns what is held back (an unfinished character, as U+FFFD) and resets to the start state.
  std::string Flush();

 private:
  const Tokenizer& tok_;
  bool strip_leading_space_;
  bool at_start_;
  std::string pending_;  // at most 3 bytes: the start of an unfinished UTF-8 sequence
};

}  // namespace grove
