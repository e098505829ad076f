#include "train/bpe_trainer.h"

#include <algorithm>
#include <array>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>

#include "base/error.h"
#include "io/gguf_writer.h"

namespace grove {
namespace {

// GPT-2's byte -> stand-in character map (the vocab cannot hold raw bytes such as space or
// newline): printable non-space Latin-1 bytes stand for themselves, the other 68 bytes map to
// U+0100.. in byte order. The model layer's copy is private to tokenizer_bpe.cc; this one must
// agree with it, which the round-trip test checks.
std::array<std::string, 256> ByteStandIns() {
  std::array<std::string, 256> out;
  int next_extra = 256;
  for (int byte = 0; byte < 256; ++byte) {
    const bool printable =
        (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
    const int c = printable ? byte : next_extra++;
    // c < 0x800: one or two UTF-8 bytes.
    out[byte] = c < 0x80 ? std::string(1, static_cast<char>(c))
                         : std::string{static_cast<char>(0xC0 | (c >> 6)),
                                       static_cast<char>(0x80 | (c & 0x3F))};
  }
  return out;
}

using PairKey = uint64_t;
PairKey Key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

struct Word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

struct HeapEntry {
  int64_t count;
  int32_t a;
  int32_t b;
  // Max-heap on count; among equal counts the smaller (a, b) comes out first.
  bool operator<(const HeapEntry& o) const {
    if (count != o.count) return count < o.count;
    if (a != o.a) return a > o.a;
    return b > o.b;
  }
};

class Trainer {
 public:
  explicit Trainer(std::vector<Word> words) : words_(std::move(words)), stamp_(words_.size(), 0) {
    for (std::size_t w = 0; w < words_.size(); ++w) {
      const Word& word = words_[w];
      for (std::size_t i = 0; i + 1 < word.symbols.size(); ++i) {
        const PairKey k = Key(word.symbols[i], word.symbols[i + 1]);
        counts_[k] += word.count;
        where_[k].push_back(static_cast<int32_t>(w));
      }
    }
    for (const auto& [k, n] : counts_)
      heap_.push({n, static_cast<int32_t>(k >> 32), static_cast<int32_t>(k & 0xFFFFFFFF)});
  }

  // The best pair now, or false when no pair is left.
  bool PopBest(int32_t* a, int32_t* b) {
    while (!heap_.empty()) {
      const HeapEntry e = heap_.top();
      heap_.pop();
      auto it = counts_.find(Key(e.a, e.b));
      const int64_t current = it == counts_.end() ? 0 : it->second;
      if (current <= 0) continue;
      if (current != e.count) {  // stale: counts changed since this entry was pushed
        heap_.push({current, e.a, e.b});
        continue;
      }
      *a = e.a;
      *b = e.b;
      return true;
    }
    return false;
  }

  // Replaces every occurrence of (a, b) by `merged` and updates the neighbouring pair counts.
  void Merge(int32_t a, int32_t b, int32_t merged) {
    const PairKey merged_key = Key(a, b);
    std::vector<int32_t> touched = std::move(where_[merged_key]);
    where_.erase(merged_key);
    counts_.erase(merged_key);
    ++epoch_;
    std::unordered_map<PairKey, int64_t> delta;
    std::vector<int32_t> out;
    for (int32_t w : touched) {
      if (stamp_[w] == epoch_) continue;  // listed twice
      stamp_[w] = epoch_;
      Word& word = words_[w];
      const std::vector<int32_t>& s = word.symbols;
      out.clear();
      bool changed = false;
      for (std::size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          if (!out.empty()) {
            delta[Key(out.back(), a)] -= word.count;
            delta[Key(out.back(), merged)] += word.count;
          }
          if (i + 2 < s.size()) {
            delta[Key(b, s[i + 2])] -= word.count;
            delta[Key(merged, s[i + 2])] += word.count;
          }
          out.push_back(merged);
          i += 2;
          changed = true;
        } else {
          out.push_back(s[i++]);
        }
      }
      if (!changed) continue;
      word.symbols = out;
      // New pairs of this word must find it at their own merge.
      for (std::size_t i = 0; i + 1 < out.size(); ++i) {
        if (out[i] == merged || out[i + 1] == merged) where_[Key(out[i], out[i + 1])].push_back(w);
      }
    }
    // Apply in key order: the heap order does not depend on it, but keeping every step in a fixed
    // order makes determinism easy to see.
    std::vector<std::pair<PairKey, int64_t>> sorted(delta.begin(), delta.end());
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [k, d] : sorted) {
      if (k == merged_key || d == 0) continue;
      int64_t& n = counts_[k];
      n += d;
      if (n <= 0) {
        counts_.erase(k);
      } else if (d > 0) {
        heap_.push({n, static_cast<int32_t>(k >> 32), static_cast<int32_t>(k & 0xFFFFFFFF)});
      }
    }
  }

 private:
  std::vector<Word> words_;
  std::vector<uint32_t> stamp_;  // per word: the merge that last visited it
  uint32_t epoch_ = 0;
  std::unordered_map<PairKey, int64_t> counts_;
  std::unordered_map<PairKey, std::vector<int32_t>>
      where_;  // pair -> words holding it (may repeat)
  std::priority_queue<HeapEntry> heap_;
};

void CheckBpeOptions(const BpeTrainerOptions& options) {
  const auto n_special = static_cast<int32_t>(options.special_tokens.size());
  if (options.vocab_size < 256 + n_special + 1 || options.vocab_size > kBpeMaxVocab) {
    Fail("tokenizer training: vocab size ", options.vocab_size, " out of range (",
         256 + n_special + 1, " to ", kBpeMaxVocab, ": 256 byte tokens, ", n_special,
         " special token(s) and at least one merge)");
  }
  std::set<std::string_view> specials;
  for (const std::string& s : options.special_tokens) {
    if (s.empty()) Fail("tokenizer training: empty special token");
    if (!specials.insert(s).second) Fail("tokenizer training: special token '", s, "' given twice");
  }
}

// Pre-token counts. An ordered map: the word list (and so every later step) is in byte order,
// whatever the hash table's iteration order.
using PreTokenCounts = std::map<std::string, int64_t, std::less<>>;

PreTokenCounts CountPreTokens(std::span<const std::string_view> texts,
                              const PreTokenizer& pre_tokenizer, int64_t* n_pre_tokens) {
  PreTokenCounts counts;
  std::vector<PreTokenizerWord> spans;
  for (std::string_view text : texts) {
    pre_tokenizer.Split(text, &spans);
    *n_pre_tokens += static_cast<int64_t>(spans.size());
    for (const PreTokenizerWord& span : spans) {
      std::string_view w = text.substr(span.begin, span.end - span.begin);
      auto it = counts.find(w);
      if (it == counts.end()) it = counts.emplace(std::string(w), 0).first;
      ++it->second;
    }
  }
  return counts;
}

// Each distinct pre-token as its bytes, with its count.
std::vector<Word> ByteWords(const PreTokenCounts& counts) {
  std::vector<Word> words;
  words.reserve(counts.size());
  for (const auto& [w, n] : counts) {
    Word word{{}, n};
    for (unsigned char c : w) word.symbols.push_back(c);
    words.push_back(std::move(word));
  }
  return words;
}

// The most frequent pair merged into a token, again and again, until the vocabulary holds
// `learned_end` tokens; `ids` maps every token's text to its id. The number of merges made.
int64_t LearnMerges(Trainer& trainer, int32_t learned_end, const BpeTrainerOptions& options,
                    BpeVocab& vocab, std::unordered_map<std::string, int32_t>& ids) {
  const auto n_special = static_cast<int32_t>(options.special_tokens.size());
  int64_t n_merges = 0;
  while (static_cast<int32_t>(vocab.tokens.size()) < learned_end) {
    int32_t a = 0, b = 0;
    if (!trainer.PopBest(&a, &b)) {
      Fail("tokenizer training: the corpus has too few distinct byte pairs for a vocab of ",
           options.vocab_size, " (", vocab.tokens.size() + n_special,
           " tokens reached); use a larger corpus or a smaller vocab");
    }
    std::string text = vocab.tokens[a] + vocab.tokens[b];
    auto [it, added] = ids.emplace(text, static_cast<int32_t>(vocab.tokens.size()));
    if (added) vocab.tokens.push_back(std::move(text));
    vocab.merges.push_back(vocab.tokens[a] + " " + vocab.tokens[b]);
    trainer.Merge(a, b, it->second);
    ++n_merges;
  }
  return n_merges;
}

}  // namespace

BpeVocab TrainBpe(std::span<const std::string_view> texts, const BpeTrainerOptions& options,
                  BpeTrainStats* stats) {
  CheckBpeOptions(options);
  const auto n_special = static_cast<int32_t>(options.special_tokens.size());
  const PreTokenizer& pre_tokenizer = PreTokenizer::ForName(options.pre_tokenizer);
  int64_t n_pre_tokens = 0;
  const PreTokenCounts counts = CountPreTokens(texts, pre_tokenizer, &n_pre_tokens);
  BpeVocab vocab;
  vocab.pre_tokenizer = pre_tokenizer.name();
  const std::array<std::string, 256> stand_ins = ByteStandIns();
  std::unordered_map<std::string, int32_t> ids;
  for (int byte = 0; byte < 256; ++byte) {
    vocab.tokens.push_back(stand_ins[byte]);
    ids.emplace(stand_ins[byte], byte);
  }
  Trainer trainer(ByteWords(counts));
  const int64_t n_merges =
      LearnMerges(trainer, options.vocab_size - n_special, options, vocab, ids);
  vocab.types.assign(vocab.tokens.size(), TokenType::kNormal);
  for (const std::string& s : options.special_tokens) {
    if (ids.count(s)) Fail("tokenizer training: special token '", s, "' is also a learned token");
    if (vocab.eos < 0) vocab.eos = static_cast<int32_t>(vocab.tokens.size());
    vocab.tokens.push_back(s);
    vocab.types.push_back(TokenType::kControl);
  }
  if (stats) *stats = {n_pre_tokens, static_cast<int64_t>(counts.size()), n_merges};
  return vocab;
}

void AddBpeTokenizerMetadata(const BpeVocab& vocab, GgufWriter* writer) {
  writer->SetString("tokenizer.ggml.model", "gpt2");
  writer->SetString("tokenizer.ggml.pre", vocab.pre_tokenizer);
  writer->SetStringArray("tokenizer.ggml.tokens", vocab.tokens);
  std::vector<int32_t> types;
  for (TokenType t : vocab.types) types.push_back(static_cast<int32_t>(t));
  writer->SetInt32Array("tokenizer.ggml.token_type", types);
  writer->SetStringArray("tokenizer.ggml.merges", vocab.merges);
  if (vocab.eos >= 0) {
    writer->SetUint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(vocab.eos));
    writer->SetUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(vocab.eos));
  }
  writer->SetBool("tokenizer.ggml.add_bos_token", false);
}

void WriteBpeTokenizerGguf(const BpeVocab& vocab, const std::string& path) {
  GgufWriter writer;
  writer.SetString("general.name", "grove-bpe");
  writer.SetString("general.type", "vocab");
  AddBpeTokenizerMetadata(vocab, &writer);
  writer.WriteFile(path);
}

}  // namespace grove
