// Byte-level BPE (`tokenizer.ggml.model = "gpt2"`): GPT-2, Llama 3, Qwen and most newer models.
//
// The pre-tokenizer splits the text into words (pretokenizer.h). Each byte of a word starts as the
// token of its GPT-2 stand-in character (below); then, repeatedly, the adjacent pair with the
// lowest merge rank (ties: leftmost) is merged, until no adjacent pair has a merge. Merges are
// keyed by the two token ids, so the loop never builds strings, and pending pairs wait in a heap:
// O(n log n) per word.
//
// GPT-2's byte<->unicode map: the vocab cannot hold raw bytes (control characters, spaces, bytes
// that are not UTF-8 on their own), so each byte is stored as a printable stand-in: the 188
// printable non-space Latin-1 bytes stand for themselves, the other 68 for U+0100.. in byte order
// (space is 'Ġ' U+0120, newline 'Ċ' U+010A). Decoding maps the stand-ins back to bytes.
#include <unicode/utf8.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <unordered_map>

#include "base/error.h"
#include "base/log.h"
#include "io/gguf.h"
#include "tokenize/pretokenizer.h"
#include "tokenize/tokenizer_vocab.h"

namespace grove {
namespace {

struct ByteCharMap {
  std::array<UChar32, 256> to_char{};
  std::array<int16_t, 324> to_byte{};  // by code point; -1 where no byte maps (>= 324 never does)

  ByteCharMap() {
    to_byte.fill(-1);
    UChar32 next_extra = 256;
    for (int byte = 0; byte < 256; ++byte) {
      const bool printable =
          (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
      to_char[byte] = printable ? byte : next_extra++;
      to_byte[to_char[byte]] = static_cast<int16_t>(byte);
    }
  }
  int ByteOf(UChar32 c) const {
    return c >= 0 && c < static_cast<UChar32>(to_byte.size()) ? to_byte[c] : -1;
  }
};

const ByteCharMap& GetByteCharMap() {
  static const ByteCharMap map;
  return map;
}

void AppendUtf8(UChar32 c, std::string* out) {
  uint8_t buf[U8_MAX_LENGTH];
  int32_t n = 0;
  U8_APPEND_UNSAFE(buf, n, c);
  out->append(reinterpret_cast<const char*>(buf), n);
}

// Decoded bytes of a normal token: stand-in characters back to bytes. A character outside the map
// (a vocab that is not byte-level everywhere) is kept as its UTF-8.
std::string UnmapBytes(std::string_view text) {
  const ByteCharMap& map = GetByteCharMap();
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const auto length = static_cast<int64_t>(text.size());
  std::string out;
  for (int64_t i = 0; i < length;) {
    const int64_t start = i;
    UChar32 c;
    U8_NEXT(s, i, length, c);
    if (const int byte = map.ByteOf(c); byte >= 0) {
      out += static_cast<char>(byte);
    } else {
      out.append(text.substr(start, i - start));
    }
  }
  return out;
}

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

class BpeModel final : public TokenizerModel {
 public:
  BpeModel(const GgufFile& gguf, TokenizerVocab* vocab);
  void Encode(std::string_view text, bool after_special, std::vector<int32_t>* out) const override;
  bool strips_leading_space() const override { return false; }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  // A token of the word being merged; merged-away symbols have id -1 and n == 0.
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    uint32_t n;
  };
  struct Bigram {
    int32_t rank;
    int32_t left;
    int32_t right;
    int32_t left_id;  // the ids when queued: if either side changed since, the pair is stale
    int32_t right_id;
    int32_t result;
  };
  // For std::push_heap (a max-heap): the lowest rank on top, then the leftmost.
  struct BigramOrder {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
  };

  // Reused across the words of one Encode call (Encode is const and may run on several threads).
  struct Scratch {
    std::vector<PreTokenizerWord> words;
    std::vector<Symbol> symbols;
    std::vector<Bigram> heap;
    std::string mapped;
  };

  void LoadMerges(const GgufFile& gguf);
  void EncodeWord(std::string_view word, Scratch* scratch, std::vector<int32_t>* out) const;
  // The steps of EncodeWord: the word as one token where the pre-tokenizer says so and the vocab
  // has it; else a symbol per byte, merged pair by pair in rank order, and the symbols left.
  bool EncodeWholeWord(std::string_view word, Scratch* scratch, std::vector<int32_t>* out) const;
  void SeedSymbols(std::string_view word, Scratch* scratch) const;
  void QueuePair(int32_t left, int32_t right, Scratch* scratch) const;
  void ApplyMerges(Scratch* scratch) const;
  void EmitSymbols(std::string_view word, const Scratch& scratch, std::vector<int32_t>* out) const;

  const TokenizerVocab& vocab_;
  const PreTokenizer* pre_;
  std::array<int32_t, 256> byte_tokens_{};  // the token of each byte's stand-in character, or -1
  std::unordered_map<uint64_t, Merge> merges_;  // PairKey(left, right) -> rank and merged token
};

BpeModel::BpeModel(const GgufFile& gguf, TokenizerVocab* vocab) : vocab_(*vocab) {
  const std::string pre_name = gguf.GetString("tokenizer.ggml.pre", "");
  pre_ = &PreTokenizer::ForName(pre_name);
  if (pre_name.empty()) {
    Log(LogLevel::kWarn, "tokenizer: '", gguf.name(),
        "' does not name its pre-tokenizer (tokenizer.ggml.pre); using llama.cpp's 'default', "
        "which may split text differently from the model's training");
  }
  // Llama 3 and Tekken want BOS; GPT-2 and most other byte-level vocabs do not. The file's flag
  // wins.
  vocab->add_bos = gguf.GetBool("tokenizer.ggml.add_bos_token", pre_->adds_bos());

  const ByteCharMap& map = GetByteCharMap();
  for (int byte = 0; byte < 256; ++byte) {
    std::string text;
    AppendUtf8(map.to_char[byte], &text);
    byte_tokens_[byte] = vocab->Find(text);
  }
  LoadMerges(gguf);

  vocab->pieces.resize(vocab->texts.size());
  for (std::size_t id = 0; id < vocab->texts.size(); ++id) {
    switch (vocab->types[id]) {
      case TokenType::kNormal:
      case TokenType::kByte:
        vocab->pieces[id] = UnmapBytes(vocab->texts[id]);
        break;
      case TokenType::kUserDefined:
        vocab->pieces[id] = vocab->texts[id];  // added tokens are stored as plain text
        break;
      case TokenType::kUnknown:
      case TokenType::kControl:
      case TokenType::kUnused:
        break;
    }
  }
}

void BpeModel::LoadMerges(const GgufFile& gguf) {
  constexpr std::string_view kKey = "tokenizer.ggml.merges";
  if (!gguf.Has(kKey)) {
    Fail("tokenizer: '", gguf.name(), "': missing ", kKey,
         " (required by the 'gpt2' byte-level BPE model)");
  }
  const std::span<const std::string> merges = gguf.GetStringArray(kKey);
  merges_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view merge = merges[rank];
    // Search from 1: in vocabs that are not byte-mapped a token may itself start with a space.
    const std::size_t space = merge.find(' ', 1);
    if (space == std::string_view::npos) {
      Fail("tokenizer: '", gguf.name(), "': ", kKey, "[", rank, "] = '", merge,
           "': expected two tokens separated by a space");
    }
    auto find = [&](std::string_view text) {
      const int32_t id = vocab_.Find(text);
      if (id < 0) {
        Fail("tokenizer: '", gguf.name(), "': ", kKey, "[", rank, "] = '", merge, "': '", text,
             "' is not in tokenizer.ggml.tokens");
      }
      return id;
    };
    const std::string_view left = merge.substr(0, space);
    const std::string_view right = merge.substr(space + 1);
    const int32_t left_id = find(left);
    const int32_t right_id = find(right);
    const int32_t result = find(std::string(left) + std::string(right));
    // A repeated pair keeps its first (best) rank.
    merges_.try_emplace(PairKey(left_id, right_id), Merge{static_cast<int32_t>(rank), result});
  }
}

void BpeModel::Encode(std::string_view text, bool /*after_special*/,
                      std::vector<int32_t>* out) const {
  if (text.size() > static_cast<std::size_t>(std::numeric_limits<int32_t>::max())) {
    Fail("tokenizer: a text run of ", text.size(), " bytes is too long to encode in one call");
  }
  Scratch scratch;
  pre_->Split(text, &scratch.words);
  for (const PreTokenizerWord& word : scratch.words) {
    EncodeWord(text.substr(word.begin, word.end - word.begin), &scratch, out);
  }
}

void BpeModel::EncodeWord(std::string_view word, Scratch* scratch,
                          std::vector<int32_t>* out) const {
  if (pre_->ignore_merges() && EncodeWholeWord(word, scratch, out)) return;
  SeedSymbols(word, scratch);
  ApplyMerges(scratch);
  EmitSymbols(word, *scratch, out);
}

bool BpeModel::EncodeWholeWord(std::string_view word, Scratch* scratch,
                               std::vector<int32_t>* out) const {
  std::string& mapped = scratch->mapped;
  mapped.clear();
  const ByteCharMap& map = GetByteCharMap();
  for (char c : word) AppendUtf8(map.to_char[static_cast<uint8_t>(c)], &mapped);
  const int32_t id = vocab_.Find(mapped);
  if (id < 0) return false;
  out->push_back(id);
  return true;
}

void BpeModel::SeedSymbols(std::string_view word, Scratch* scratch) const {
  std::vector<Symbol>& symbols = scratch->symbols;
  symbols.clear();
  scratch->heap.clear();
  const auto n = static_cast<int32_t>(word.size());
  for (int32_t i = 0; i < n; ++i) {
    symbols.push_back(
        {byte_tokens_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, 1});
  }
  for (int32_t i = 1; i < n; ++i) QueuePair(i - 1, i, scratch);
}

// Queues the merge of symbols left and right, if both are live tokens and the merges know the pair.
void BpeModel::QueuePair(int32_t left, int32_t right, Scratch* scratch) const {
  if (left < 0 || right < 0) return;
  const int32_t left_id = scratch->symbols[left].id;
  const int32_t right_id = scratch->symbols[right].id;
  if (left_id < 0 || right_id < 0) return;
  const auto it = merges_.find(PairKey(left_id, right_id));
  if (it == merges_.end()) return;
  std::vector<Bigram>& heap = scratch->heap;
  heap.push_back({it->second.rank, left, right, left_id, right_id, it->second.result});
  std::push_heap(heap.begin(), heap.end(), BigramOrder());
}

void BpeModel::ApplyMerges(Scratch* scratch) const {
  std::vector<Symbol>& symbols = scratch->symbols;
  std::vector<Bigram>& heap = scratch->heap;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), BigramOrder());
    const Bigram bigram = heap.back();
    heap.pop_back();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Token ids only ever grow into longer tokens, so an unchanged id means an unchanged symbol.
    if (left.n == 0 || right.n == 0 || left.id != bigram.left_id || right.id != bigram.right_id ||
        left.next != bigram.right) {
      continue;
    }
    left.id = bigram.result;
    left.n += right.n;
    left.next = right.next;
    right.id = -1;
    right.n = 0;
    if (left.next >= 0) symbols[left.next].prev = bigram.left;
    QueuePair(left.prev, bigram.left, scratch);
    QueuePair(bigram.left, left.next, scratch);
  }
}

void BpeModel::EmitSymbols(std::string_view word, const Scratch& scratch,
                           std::vector<int32_t>* out) const {
  const std::vector<Symbol>& symbols = scratch.symbols;
  for (int32_t i = word.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    // A byte whose stand-in is missing from the vocab cannot be spelled: unk if there is one.
    const int32_t id = symbols[i].id >= 0 ? symbols[i].id : vocab_.unk;
    if (id < 0) {
      char byte[8];
      std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<uint8_t>(word[i]));
      Fail("tokenizer: cannot encode byte ", byte,
           ": the vocab has no token for its stand-in character and no unknown token");
    }
    out->push_back(id);
  }
}

}  // namespace

std::unique_ptr<TokenizerModel> MakeBpeModel(const GgufFile& gguf, TokenizerVocab* vocab) {
  return std::make_unique<BpeModel>(gguf, vocab);
}

}  // namespace grove
