// The synthetic training corpus: a deterministic mix of stories, arithmetic word problems and Game
// of 24 prompts, split into training and validation parts (format in docs/corpus.md).
//
// Size is counted in words: maximal runs of non-white-space bytes ("12", "=", "\"Where" are one
// word each). Generation stops after the first document that brings the total to the requested
// count. Document i is drawn from its own random stream (seed, i) and goes to the validation part
// when i % valid_every == valid_every - 1, so the split is by document and a longer corpus of the
// same seed extends a shorter one.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace grove {

enum class CorpusKind { kStory, kArithmetic, kGame24Propose, kGame24Value };
inline constexpr int kCorpusKindCount = 4;
std::string_view CorpusKindName(CorpusKind kind);

// A document: non-empty lines, ending with a newline, never an empty line.
struct CorpusDocument {
  CorpusKind kind = CorpusKind::kStory;
  std::string text;
};
CorpusDocument GenerateCorpusDocument(uint64_t seed, uint64_t index);

struct CorpusOptions {
  uint64_t seed = 1;
  int64_t target_words = 1'000'000;
  int valid_every = 20;  // 1 document in 20 (5%) is held out
};

struct CorpusPartStats {
  std::array<int64_t, kCorpusKindCount> documents{};
  std::array<int64_t, kCorpusKindCount> words{};
  std::array<int64_t, kCorpusKindCount> bytes{};
  int64_t total_documents() const;
  int64_t total_words() const;
  int64_t total_bytes() const;
};

struct CorpusStats {
  CorpusPartStats train;
  CorpusPartStats valid;
  // Distinct words over both parts: maximal runs of ASCII letters, lower-cased ("Mira's" gives
  // "mira" and "s"); numbers and punctuation are not words here.
  int64_t distinct_words = 0;
};

// The text of each part: documents separated by one empty line ("\n\n" between them).
struct Corpus {
  std::string train;
  std::string valid;
  CorpusStats stats;
};

// Throws grove::Error on out-of-range options.
Corpus GenerateCorpus(const CorpusOptions& options);

// The same documents handed to `sink(valid, text)` one at a time, in order, without holding the
// corpus in memory (a corpus of 10^10 words is tens of GB); returns the statistics.
CorpusStats GenerateCorpusDocuments(const CorpusOptions& options,
                                    const std::function<void(bool, std::string_view)>& sink);

// Counts whitespace-separated words (the unit of CorpusOptions::target_words).
int64_t CountWords(std::string_view text);

}  // namespace grove
