#include "train/corpus.h"

#include <iterator>
#include <unordered_set>

#include "base/error.h"
#include "base/named.h"
#include "tasks/corpus_rng.h"
#include "train/corpus_arithmetic.h"
#include "train/corpus_game24.h"
#include "train/corpus_story.h"

namespace grove {
namespace {

// Mix of document kinds, in percent. Stories dominate, as language is what the model must learn
// first; the rest gives the reasoning formats enough examples to be learned exactly.
constexpr int kStoryPercent = 60;
constexpr int kArithmeticPercent = 20;
constexpr int kProposePercent = 10;

void AddDistinctWords(std::string_view text, std::unordered_set<std::string>* words) {
  std::string word;
  for (char c : text) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter) {
      word += static_cast<char>(c | 0x20);
    } else if (!word.empty()) {
      words->insert(word);
      word.clear();
    }
  }
  if (!word.empty()) words->insert(word);
}

}  // namespace

constexpr Named<CorpusKind> kCorpusKindNames[] = {
    {CorpusKind::kStory, "story"},
    {CorpusKind::kArithmetic, "arithmetic"},
    {CorpusKind::kGame24Propose, "game24-propose"},
    {CorpusKind::kGame24Value, "game24-value"},
};
static_assert(std::size(kCorpusKindNames) == kCorpusKindCount);

std::string_view CorpusKindName(CorpusKind kind) { return NameOf(kCorpusKindNames, kind); }

int64_t CorpusPartStats::total_documents() const {
  int64_t n = 0;
  for (int64_t v : documents) n += v;
  return n;
}
int64_t CorpusPartStats::total_words() const {
  int64_t n = 0;
  for (int64_t v : words) n += v;
  return n;
}
int64_t CorpusPartStats::total_bytes() const {
  int64_t n = 0;
  for (int64_t v : bytes) n += v;
  return n;
}

int64_t CountWords(std::string_view text) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

CorpusDocument GenerateCorpusDocument(uint64_t seed, uint64_t index) {
  CorpusRng rng(seed, index);
  const int roll = static_cast<int>(rng.Below(100));
  if (roll < kStoryPercent) return {CorpusKind::kStory, GenerateStory(rng)};
  if (roll < kStoryPercent + kArithmeticPercent)
    return {CorpusKind::kArithmetic, GenerateArithmeticProblem(rng)};
  if (roll < kStoryPercent + kArithmeticPercent + kProposePercent) {
    return {CorpusKind::kGame24Propose, GenerateGame24Propose(rng)};
  }
  return {CorpusKind::kGame24Value, GenerateGame24Value(rng)};
}

CorpusStats GenerateCorpusDocuments(const CorpusOptions& options,
                                    const std::function<void(bool, std::string_view)>& sink) {
  if (options.target_words < 1 || options.target_words > 10'000'000'000) {
    Fail("corpus: word count ", options.target_words, " out of range (1 to 10^10)");
  }
  if (options.valid_every < 2)
    Fail("corpus: valid_every must be at least 2, got ", options.valid_every);
  CorpusStats corpus_stats;
  std::unordered_set<std::string> distinct;
  int64_t words = 0;
  for (uint64_t i = 0; words < options.target_words; ++i) {
    const CorpusDocument doc = GenerateCorpusDocument(options.seed, i);
    const bool valid = i % options.valid_every == static_cast<uint64_t>(options.valid_every - 1);
    CorpusPartStats& stats = valid ? corpus_stats.valid : corpus_stats.train;
    sink(valid, doc.text);
    const int64_t doc_words = CountWords(doc.text);
    const auto k = static_cast<std::size_t>(doc.kind);
    stats.documents[k] += 1;
    stats.words[k] += doc_words;
    stats.bytes[k] += static_cast<int64_t>(doc.text.size());
    words += doc_words;
    AddDistinctWords(doc.text, &distinct);
  }
  corpus_stats.distinct_words = static_cast<int64_t>(distinct.size());
  return corpus_stats;
}

Corpus GenerateCorpus(const CorpusOptions& options) {
  Corpus corpus;
  corpus.stats = GenerateCorpusDocuments(options, [&corpus](bool valid, std::string_view doc) {
    std::string& text = valid ? corpus.valid : corpus.train;
    if (!text.empty()) text += '\n';  // the empty line between documents
    text += doc;
  });
  return corpus;
}

}  // namespace grove
