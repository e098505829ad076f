// SentencePiece-style BPE (`tokenizer.ggml.model = "llama"`), as llama.cpp's llm_tokenizer_spm runs it.
//
// The text gets a space prefix, spaces become U+2581 ("▁"), and the text is split into UTF-8
// characters. Then, repeatedly, the adjacent pair whose concatenation is a vocab token with the highest
// score is merged (ties: leftmost), until no adjacent pair forms a token. A remaining piece that is not
// a token (a character outside the vocab) is spelled with byte-fallback tokens <0xXX>.
//
// Pairs wait in a priority queue; a merge invalidates the queued pairs of its two symbols, which are
// recognised and skipped when popped (their lengths no longer add up), so encoding is O(n log n).
#include <array>
#include <charconv>
#include <cstdio>
#include <limits>
#include <queue>

#include "base/error.h"
#include "io/gguf.h"
#include "model/tokenizer_vocab.h"

namespace grove {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Length of the UTF-8 sequence a byte starts, by its high nibble, as llama.cpp's unicode_len_utf8: a
// stray continuation byte counts as one character, and ill-formed sequences still advance, so any
// byte string splits into "characters" without failing (byte fallback then spells them).
std::size_t Utf8SequenceLength(uint8_t byte) {
  static constexpr std::array<uint8_t, 16> kLengths = {1, 1, 1, 1, 1, 1, 1, 1,
                                                        1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[byte >> 4];
}

// "<0x0A>" -> 0x0A.
bool ParseByteToken(std::string_view text, uint8_t* value) {
  if (text.size() != 6 || !text.starts_with("<0x") || text[5] != '>') return false;
  const char* hex = text.data() + 3;
  return std::from_chars(hex, hex + 2, *value, 16).ptr == hex + 2;
}

class SpmModel final : public TokenizerModel {
 public:
  SpmModel(const GgufFile& gguf, TokenizerVocab* vocab);
  void Encode(std::string_view text, bool after_special, std::vector<int32_t>* out) const override;
  bool strips_leading_space() const override { return add_space_prefix_; }

 private:
  // A piece of the escaped text; merged-away symbols have n == 0. prev/next link the live ones.
  struct Symbol {
    std::size_t begin;
    std::size_t n;
    int32_t prev;
    int32_t next;
  };
  struct Bigram {
    float score;
    int32_t left;
    int32_t right;
    std::size_t size;  // bytes of left + right when queued; a mismatch later means it went stale
  };
  // std::priority_queue keeps the largest on top: higher score first, then the leftmost.
  struct BigramOrder {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
  };
  using BigramQueue = std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder>;

  void TryAddBigram(std::string_view text, const std::vector<Symbol>& symbols, int32_t left,
                    int32_t right, BigramQueue* queue) const;
  void EmitSymbol(std::string_view piece, std::vector<int32_t>* out) const;

  const TokenizerVocab& vocab_;
  bool add_space_prefix_ = true;
  std::array<int32_t, 256> byte_tokens_{};  // <0xXX> for each byte, else unk, else -1
};

SpmModel::SpmModel(const GgufFile& gguf, TokenizerVocab* vocab) : vocab_(*vocab) {
  if (vocab->scores.empty()) {
    Fail("tokenizer: '", gguf.name(),
         "': missing tokenizer.ggml.scores (the 'llama' SentencePiece model merges by score)");
  }
  add_space_prefix_ = gguf.GetBool("tokenizer.ggml.add_space_prefix", true);
  vocab->add_bos = gguf.GetBool("tokenizer.ggml.add_bos_token", true);

  for (int byte = 0; byte < 256; ++byte) {
    char text[8];
    std::snprintf(text, sizeof(text), "<0x%02X>", byte);
    const int32_t id = vocab->Find(text);
    byte_tokens_[byte] = id >= 0 ? id : vocab->unk;
  }

  vocab->pieces.resize(vocab->texts.size());
  for (std::size_t id = 0; id < vocab->texts.size(); ++id) {
    const std::string& text = vocab->texts[id];
    std::string& piece = vocab->pieces[id];
    switch (vocab->types[id]) {
      case TokenType::kNormal:
        for (std::size_t i = 0; i < text.size();) {
          if (text.compare(i, kSpaceMarker.size(), kSpaceMarker) == 0) {
            piece += ' ';
            i += kSpaceMarker.size();
          } else {
            piece += text[i++];
          }
        }
        break;
      case TokenType::kByte: {
        uint8_t value = 0;
        if (!ParseByteToken(text, &value)) {
          Fail("tokenizer: '", gguf.name(), "': tokenizer.ggml.tokens[", id, "] = '", text,
               "' has type byte (6) but is not spelled <0xXX>");
        }
        piece.assign(1, static_cast<char>(value));
        break;
      }
      case TokenType::kUserDefined:
        piece = text;  // added tokens decode to their text as written, as in llama.cpp
        break;
      case TokenType::kUnknown:
      case TokenType::kControl:
      case TokenType::kUnused:
        break;  // invisible in decoded text
    }
  }
}

void SpmModel::TryAddBigram(std::string_view text, const std::vector<Symbol>& symbols,
                            int32_t left, int32_t right, BigramQueue* queue) const {
  if (left < 0 || right < 0) return;
  const std::size_t size = symbols[left].n + symbols[right].n;
  // Live neighbours are adjacent in the text, so their concatenation is a substring of it.
  const int32_t id = vocab_.Find(text.substr(symbols[left].begin, size));
  if (id < 0) return;
  queue->push({vocab_.scores[id], left, right, size});
}

void SpmModel::EmitSymbol(std::string_view piece, std::vector<int32_t>* out) const {
  if (const int32_t id = vocab_.Find(piece); id >= 0) {
    out->push_back(id);
    return;
  }
  for (char c : piece) {
    const int32_t id = byte_tokens_[static_cast<uint8_t>(c)];
    if (id < 0) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<uint8_t>(c));
      Fail("tokenizer: cannot encode byte ", name,
           ": the vocab has neither that byte token nor an unknown token");
    }
    out->push_back(id);
  }
}

void SpmModel::Encode(std::string_view raw, bool after_special, std::vector<int32_t>* out) const {
  if (raw.empty()) return;
  std::string text;
  text.reserve(raw.size() + raw.size() / 2 + kSpaceMarker.size());
  if (add_space_prefix_ && after_special) text += kSpaceMarker;
  for (char c : raw) {
    if (c == ' ') {
      text += kSpaceMarker;
    } else {
      text += c;
    }
  }
  if (text.size() > static_cast<std::size_t>(std::numeric_limits<int32_t>::max())) {
    Fail("tokenizer: a text run of ", raw.size(), " bytes is too long to encode in one call");
  }

  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t n =
        std::min(Utf8SequenceLength(static_cast<uint8_t>(text[begin])), text.size() - begin);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({begin, n, index - 1, begin + n == text.size() ? -1 : index + 1});
    begin += n;
  }

  BigramQueue queue;
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) {
    TryAddBigram(text, symbols, i - 1, i, &queue);
  }
  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Stale: one side was merged away, or grew, since the pair was queued.
    if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;

    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;

    TryAddBigram(text, symbols, left.prev, bigram.left, &queue);
    TryAddBigram(text, symbols, bigram.left, left.next, &queue);
  }

  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    EmitSymbol(std::string_view(text).substr(symbols[i].begin, symbols[i].n), out);
  }
}

}  // namespace

std::unique_ptr<TokenizerModel> MakeSpmModel(const GgufFile& gguf, TokenizerVocab* vocab) {
  return std::make_unique<SpmModel>(gguf, vocab);
}

}  // namespace grove
