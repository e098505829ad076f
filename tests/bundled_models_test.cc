// The model pair shipped in models/: it loads, has the promised sizes, and writes text in the
// corpus's own style. Assertions are on structure (known words, sentences), never on exact text.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>

#include "model/model.h"
#include "model/tokenizer.h"
#include "speculate/plain_decoding.h"
#include "train/corpus.h"

#ifndef GROVE_MODELS_DIR
#error "GROVE_MODELS_DIR must be defined by the build"
#endif

namespace grove {
namespace {

namespace fs = std::filesystem;

const std::string kTarget = std::string(GROVE_MODELS_DIR) + "/grove-target.gguf";
const std::string kDraft = std::string(GROVE_MODELS_DIR) + "/grove-draft.gguf";

// Lower-case words without punctuation.
std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::string w;
  for (char c : text) {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!w.empty()) {
      words.push_back(w);
      w.clear();
    }
  }
  if (!w.empty()) words.push_back(w);
  return words;
}

TEST(BundledModels, ArePresentAndSizedAsPromised) {
  ASSERT_TRUE(fs::exists(kTarget)) << kTarget << " is part of the repository";
  ASSERT_TRUE(fs::exists(kDraft)) << kDraft << " is part of the repository";
  EXPECT_LE(fs::file_size(kTarget) + fs::file_size(kDraft), 40u * 1000 * 1000);
  auto target = Model::Load(kTarget), draft = Model::Load(kDraft);
  const int64_t nt = target->config().n_params(), nd = draft->config().n_params();
  EXPECT_GE(nt, 10'000'000);
  EXPECT_LE(nt, 30'000'000);
  EXPECT_GE(static_cast<double>(nt) / nd, 10.0);
  EXPECT_LE(static_cast<double>(nt) / nd, 20.0);
  EXPECT_EQ(target->config().n_vocab, draft->config().n_vocab);
}

TEST(BundledModels, GreedyStoryIsMadeOfTheCorpussWordsAndSentences) {
  auto target = Model::Load(kTarget);
  const Tokenizer& tok = *target->tokenizer();
  const std::vector<int32_t> prompt = tok.Encode("Once upon a time", /*add_bos=*/false);
  std::vector<int32_t> all = prompt;
  const std::vector<int32_t> out = GeneratePlain(
      *target, prompt, SamplerParams{.temperature = 0.0f}, {.n_predict = 120}, nullptr);
  all.insert(all.end(), out.begin(), out.end());
  const std::string text = tok.Decode(all);
  SCOPED_TRACE(text);

  // The words of a fresh corpus sample (another seed than training) are the language.
  const Corpus sample = GenerateCorpus({.seed = 12345, .target_words = 300000});
  std::set<std::string> known;
  for (const std::string& w : Words(sample.train)) known.insert(w);
  const std::vector<std::string> words = Words(text);
  ASSERT_GE(words.size(), 25u);
  std::size_t hits = 0;
  for (const std::string& w : words) hits += known.count(w);
  EXPECT_GE(static_cast<double>(hits) / words.size(), 0.95) << "share of known words";

  // Sentences: several full stops, each followed by a space or newline and a capital letter (or
  // dialogue), and no word repeated five times in a row (a degenerate loop).
  int stops = 0, well_formed = 0;
  for (std::size_t i = 0; i + 2 < text.size(); ++i) {
    if (text[i] != '.') continue;
    ++stops;
    const char next = text[i + 1] == ' ' || text[i + 1] == '\n' ? text[i + 2] : text[i + 1];
    well_formed += std::isupper(static_cast<unsigned char>(next)) || next == '"' || next == '\n';
  }
  EXPECT_GE(stops, 3);
  EXPECT_GE(well_formed, stops - 1);
  int run = 1;
  for (std::size_t i = 1; i < words.size(); ++i) {
    run = words[i] == words[i - 1] ? run + 1 : 1;
    EXPECT_LT(run, 5) << "word '" << words[i] << "' repeats";
  }
}

}  // namespace
}  // namespace grove
