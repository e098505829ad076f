// SentencePiece-style BPE (`tokenizer.ggml.model = "llama"`), as llama.cpp's llm_tokenizer_spm
// runs it.
//
// The text gets a space prefix, spaces become U+2581 ("▁"), and the text is split into UTF-8
// characters. Then, repeatedly, the adjacent pair whose concatenation is a vocab token with the
// highest score is merged (ties: leftmost), until no adjacent pair forms a token. A remaining piece
// that is not a token (a character outside the vocab) is spelled with byte-fallback tokens <0xXX>.
//
// Pairs wait in a heap; a merge invalidates the queued pairs of its two symbols, which are
// recognised and skipped when popped (their lengths no longer add up), so a run is O(n log n).
// llama.cpp runs the whole text as one sequence, and at 1 MB the heap outgrows the cache and its
// sift-downs dominate. So when no token has "▁" right after another character (true of
// SentencePiece vocabs trained with whitespace splitting, checked at load), a word boundary before
// a "▁" can never be merged across, and each word is merged on its own with a small heap. The
// result is identical: merges in different words never interact, and within a word they happen in
// the same (score, position) order.
//
// Ill-formed UTF-8 is split into maximal ill-formed subsequences (ICU's U8_NEXT), each spelled with
// byte tokens. llama.cpp sizes a "character" by its first byte alone, so a truncated sequence
// swallows the bytes after it (even the "▁" of an escaped space) and decoding no longer gives back
// the input. For valid UTF-8 both split identically.
#include <unicode/utf8.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <limits>

#include "base/error.h"
#include "io/gguf.h"
#include "tokenize/tokenizer_vocab.h"

namespace grove {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Bytes of the UTF-8 character (or maximal ill-formed subsequence) starting at `begin`.
std::size_t CharLength(std::string_view text, std::size_t begin) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  auto i = static_cast<int64_t>(begin);
  UChar32 c;
  U8_NEXT(s, i, static_cast<int64_t>(text.size()), c);
  return static_cast<std::size_t>(i) - begin;
}

// "<0x0A>" -> 0x0A.
bool ParseByteToken(std::string_view text, uint8_t* value) {
  if (text.size() != 6 || !text.starts_with("<0x") || text[5] != '>') return false;
  const char* hex = text.data() + 3;
  return std::from_chars(hex, hex + 2, *value, 16).ptr == hex + 2;
}

// Whether some token has "▁" right after a character that is not "▁" (e.g. "a▁b"); such a token
// could be merged across a word boundary, so words cannot be merged separately.
bool HasInnerSpaceMarker(std::string_view token) {
  for (std::size_t p = token.find(kSpaceMarker, 1); p != std::string_view::npos;
       p = token.find(kSpaceMarker, p + 1)) {
    if (p < kSpaceMarker.size() ||
        token.substr(p - kSpaceMarker.size(), kSpaceMarker.size()) != kSpaceMarker) {
      return true;
    }
  }
  return false;
}

class SpmModel final : public TokenizerModel {
 public:
  SpmModel(const GgufFile& gguf, TokenizerVocab* vocab);
  void Encode(std::string_view text, bool after_special, std::vector<int32_t>* out) const override;
  bool strips_leading_space() const override { return add_space_prefix_; }

 private:
  // A piece of the word; merged-away symbols have n == 0. prev/next link the live ones.
  struct Symbol {
    uint32_t begin;
    uint32_t n;
    int32_t prev;
    int32_t next;
  };
  struct Bigram {
    float score;
    int32_t left;
    int32_t right;
    uint32_t size;  // bytes of left + right when queued; a mismatch later means it went stale
  };
  // For the std heap functions (a max-heap): higher score on top, then the leftmost.
  struct BigramOrder {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
  };
  struct Scratch {
    std::vector<Symbol> symbols;
    std::vector<Bigram> heap;
  };

  void EncodeWord(std::string_view word, Scratch* scratch, std::vector<int32_t>* out) const;
  void TryAddBigram(std::string_view word, Scratch* scratch, int32_t left, int32_t right) const;
  void EmitSymbol(std::string_view piece, std::vector<int32_t>* out) const;

  const TokenizerVocab& vocab_;
  bool add_space_prefix_ = true;
  bool merge_words_separately_ = false;
  std::array<int32_t, 256> byte_tokens_{};  // <0xXX> for each byte, else unk, else -1
};

SpmModel::SpmModel(const GgufFile& gguf, TokenizerVocab* vocab) : vocab_(*vocab) {
  if (vocab->scores.empty()) {
    Fail("tokenizer: '", gguf.name(),
         "': missing tokenizer.ggml.scores (the 'llama' SentencePiece model merges by score)");
  }
  add_space_prefix_ = gguf.GetBool("tokenizer.ggml.add_space_prefix", true);
  merge_words_separately_ =
      std::none_of(vocab->texts.begin(), vocab->texts.end(),
                   [](const std::string& t) { return HasInnerSpaceMarker(t); });
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

void SpmModel::TryAddBigram(std::string_view word, Scratch* scratch, int32_t left,
                            int32_t right) const {
  if (left < 0 || right < 0) return;
  const std::vector<Symbol>& symbols = scratch->symbols;
  const uint32_t size = symbols[left].n + symbols[right].n;
  // Live neighbours are adjacent in the word, so their concatenation is a substring of it.
  const int32_t id = vocab_.Find(word.substr(symbols[left].begin, size));
  if (id < 0) return;
  scratch->heap.push_back({vocab_.scores[id], left, right, size});
  std::push_heap(scratch->heap.begin(), scratch->heap.end(), BigramOrder());
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

void SpmModel::EncodeWord(std::string_view word, Scratch* scratch,
                          std::vector<int32_t>* out) const {
  if (word.empty()) return;
  std::vector<Symbol>& symbols = scratch->symbols;
  std::vector<Bigram>& heap = scratch->heap;
  symbols.clear();
  heap.clear();
  for (std::size_t begin = 0; begin < word.size();) {
    const std::size_t n = CharLength(word, begin);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(begin), static_cast<uint32_t>(n), index - 1,
                       begin + n == word.size() ? -1 : index + 1});
    begin += n;
  }

  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) {
    TryAddBigram(word, scratch, i - 1, i);
  }
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), BigramOrder());
    const Bigram bigram = heap.back();
    heap.pop_back();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Stale: one side was merged away, or grew, since the pair was queued.
    if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;

    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;

    TryAddBigram(word, scratch, left.prev, bigram.left);
    TryAddBigram(word, scratch, bigram.left, left.next);
  }

  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    EmitSymbol(word.substr(symbols[i].begin, symbols[i].n), out);
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

  Scratch scratch;
  const std::string_view all = text;
  if (!merge_words_separately_) {
    EncodeWord(all, &scratch, out);
    return;
  }
  // Words start at a "▁" that follows another character; runs of "▁" stay with the word after them.
  std::size_t word_begin = 0;
  for (std::size_t p = all.find(kSpaceMarker, 1); p != std::string_view::npos;
       p = all.find(kSpaceMarker, p + kSpaceMarker.size())) {
    if (p >= kSpaceMarker.size() &&
        all.substr(p - kSpaceMarker.size(), kSpaceMarker.size()) == kSpaceMarker) {
      continue;
    }
    EncodeWord(all.substr(word_begin, p - word_begin), &scratch, out);
    word_begin = p;
  }
  EncodeWord(all.substr(word_begin), &scratch, out);
}

}  // namespace

std::unique_ptr<TokenizerModel> MakeSpmModel(const GgufFile& gguf, TokenizerVocab* vocab) {
  return std::make_unique<SpmModel>(gguf, vocab);
}

}  // namespace grove
