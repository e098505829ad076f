// The synthetic corpus: determinism, format, correct arithmetic and Game-of-24 answers (checked
// against an independent brute force written here), characters that recur, clear file errors.
#include "train/corpus.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "tasks/corpus_rng.h"
#include "test_support.h"
#include "train/corpus_arithmetic.h"
#include "train/corpus_files.h"
#include "train/corpus_game24.h"
#include "train/corpus_lexicon.h"
#include "train/corpus_story.h"

namespace grove {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<long> Numbers(const std::string& s) {
  std::vector<long> v;
  std::istringstream in(s);
  for (long x; in >> x;) v.push_back(x);
  return v;
}

TEST(CorpusTest, SameSeedSameBytesOtherSeedOtherText) {
  const Corpus a = GenerateCorpus({.seed = 7, .target_words = 5000});
  const Corpus b = GenerateCorpus({.seed = 7, .target_words = 5000});
  const Corpus c = GenerateCorpus({.seed = 8, .target_words = 5000});
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.valid, b.valid);
  EXPECT_NE(a.train, c.train);
  EXPECT_GE(a.stats.train.total_words() + a.stats.valid.total_words(), 5000);

  // And through the files.
  const std::string dir1 = testing::TempPath("corpus_a"), dir2 = testing::TempPath("corpus_b");
  WriteCorpusFiles(a, dir1);
  WriteCorpusFiles(b, dir2);
  for (std::string_view part : {kCorpusTrainFile, kCorpusValidFile}) {
    EXPECT_EQ(ReadCorpusFile(dir1, part), ReadCorpusFile(dir2, part)) << part;
  }
  EXPECT_EQ(ReadCorpusFile(dir1, kCorpusTrainFile), a.train);
}

TEST(CorpusTest, LongerCorpusExtendsShorterOne) {
  const Corpus small = GenerateCorpus({.seed = 3, .target_words = 2000});
  const Corpus large = GenerateCorpus({.seed = 3, .target_words = 6000});
  EXPECT_TRUE(large.train.starts_with(small.train));
}

TEST(CorpusTest, DocumentsAreSeparatedByOneEmptyLineAndSplitOneInTwenty) {
  const Corpus corpus = GenerateCorpus({.seed = 11, .target_words = 20000});
  for (const std::string* text : {&corpus.train, &corpus.valid}) {
    EXPECT_EQ(text->find("\n\n\n"), std::string::npos);
    EXPECT_FALSE(text->starts_with("\n"));
    EXPECT_TRUE(text->ends_with("\n"));
    EXPECT_FALSE(text->ends_with("\n\n"));
  }
  const int64_t docs = corpus.stats.train.total_documents() + corpus.stats.valid.total_documents();
  EXPECT_EQ(corpus.stats.valid.total_documents(), docs / 20);
  for (int k = 0; k < kCorpusKindCount; ++k) EXPECT_GT(corpus.stats.train.documents[k], 0) << k;
  // Every document kind occurs with its share (60/20/10/10 percent), give or take.
  const double story_share = static_cast<double>(corpus.stats.train.documents[0]) /
                             static_cast<double>(corpus.stats.train.total_documents());
  EXPECT_NEAR(story_share, 0.6, 0.08);
}

TEST(CorpusTest, SplitDocumentsFindsEveryDocumentOnce) {
  const Corpus corpus = GenerateCorpus({.seed = 11, .target_words = 20000});
  const std::vector<std::string_view> docs = SplitDocuments(corpus.train);
  EXPECT_EQ(static_cast<int64_t>(docs.size()), corpus.stats.train.total_documents());
  std::string joined;
  for (std::string_view doc : docs) {
    ASSERT_TRUE(doc.ends_with("\n"));
    EXPECT_EQ(doc.find("\n\n"), std::string_view::npos);
    joined += doc;
    joined += '\n';
  }
  EXPECT_EQ(joined, corpus.train + "\n");
  // Runs of blank lines, and text without a final newline.
  EXPECT_EQ(SplitDocuments("a\n\n\n\nb c"), (std::vector<std::string_view>{"a\n", "b c"}));
  EXPECT_TRUE(SplitDocuments("").empty());
}

TEST(CorpusTest, ManyDistinctWords) {
  EXPECT_GT(StoryLexicon().AllForms().size(), 6000u);
  const Corpus corpus = GenerateCorpus({.seed = 1, .target_words = 100000});
  EXPECT_GT(corpus.stats.distinct_words, 2500);
}

TEST(CorpusTest, ArithmeticStepsAndAnswersAreCorrect) {
  const std::regex step(R"((\d+) ([-+*/]) (\d+) = (\d+))");
  for (uint64_t i = 0; i < 300; ++i) {
    CorpusRng rng(5, i);
    const std::string doc = GenerateArithmeticProblem(rng);
    const std::vector<std::string> lines = Lines(doc);
    ASSERT_GE(lines.size(), 4u) << doc;
    ASSERT_TRUE(lines[0].starts_with("Problem: ")) << doc;
    ASSERT_EQ(lines[1], "Solution:") << doc;
    ASSERT_TRUE(lines.back().starts_with("Answer: ")) << doc;
    // Operands are numbers given in the problem or results of earlier steps.
    std::set<long> known;
    const std::regex number(R"(\d+)");
    for (std::sregex_iterator it(lines[0].begin(), lines[0].end(), number), end; it != end; ++it) {
      known.insert(std::stol(it->str()));
    }
    long last = -1;
    int n_steps = 0;
    for (std::size_t l = 2; l + 1 < lines.size(); ++l) {
      for (std::sregex_iterator it(lines[l].begin(), lines[l].end(), step), end; it != end; ++it) {
        const long x = std::stol((*it)[1]), y = std::stol((*it)[3]), z = std::stol((*it)[4]);
        const char op = (*it)[2].str()[0];
        const long expect = op == '+' ? x + y : op == '-' ? x - y : op == '*' ? x * y : x / y;
        if (op == '/') {
          EXPECT_EQ(x % y, 0) << doc;
        }
        EXPECT_EQ(z, expect) << doc;
        EXPECT_GE(z, 0) << doc;
        EXPECT_TRUE(known.count(x) && known.count(y)) << doc;
        known.insert(z);
        last = z;
        ++n_steps;
      }
    }
    EXPECT_GE(n_steps, 2) << doc;
    EXPECT_EQ(std::stol(lines.back().substr(8)), last) << doc;
  }
}

// Independent reference: can `v` reach 24? In doubles over all operations (any_rational), or with
// every intermediate result a non-negative integer.
bool BruteForce24(std::vector<double> v, bool any_rational) {
  if (v.size() == 1) return std::fabs(v[0] - 24) < 1e-9;
  for (std::size_t i = 0; i < v.size(); ++i) {
    for (std::size_t j = 0; j < v.size(); ++j) {
      if (i == j) continue;
      std::vector<double> rest;
      for (std::size_t k = 0; k < v.size(); ++k) {
        if (k != i && k != j) rest.push_back(v[k]);
      }
      const double x = v[i], y = v[j];
      std::vector<double> results = {x + y, x * y, x - y};
      if (y != 0) results.push_back(x / y);
      for (double r : results) {
        if (!any_rational && (r < -1e-9 || std::fabs(r - std::round(r)) > 1e-9)) continue;
        rest.push_back(r);
        if (BruteForce24(rest, any_rational)) return true;
        rest.pop_back();
      }
    }
  }
  return false;
}

std::string ReferenceLabel(const std::vector<int>& numbers) {
  std::vector<double> v(numbers.begin(), numbers.end());
  if (BruteForce24(v, false)) return "sure";
  return BruteForce24(v, true) ? "likely" : "impossible";
}

TEST(CorpusTest, Game24LabelsMatchBruteForceOnEveryStartingHand) {
  // All 1820 hands of four numbers from 1..13; 1362 of them are solvable (the 4nums.com count).
  int solvable = 0;
  for (int a = 1; a <= 13; ++a) {
    for (int b = a; b <= 13; ++b) {
      for (int c = b; c <= 13; ++c) {
        for (int d = c; d <= 13; ++d) {
          const std::vector<int> hand = {a, b, c, d};
          const Game24Value value = EvaluateGame24(hand);
          ASSERT_EQ(Game24LabelName(value.label), ReferenceLabel(hand))
              << a << " " << b << " " << c << " " << d;
          if (value.label != Game24Label::kImpossible) {
            ++solvable;
            ASSERT_FALSE(value.solution.empty());
            EXPECT_EQ(value.solution.back().left, (std::vector<Rational>{{24, 1}}));
          }
        }
      }
    }
  }
  EXPECT_EQ(solvable, 1362);
}

TEST(CorpusTest, Game24ValueDocumentsCarryCorrectLabels) {
  std::map<std::string, int> labels;
  for (uint64_t i = 0; i < 150; ++i) {
    CorpusRng rng(9, i);
    const std::vector<std::string> lines = Lines(GenerateGame24Value(rng));
    ASSERT_TRUE(lines[0].starts_with("Value: "));
    std::vector<int> numbers;
    for (long x : Numbers(lines[0].substr(7))) numbers.push_back(static_cast<int>(x));
    ASSERT_GE(numbers.size(), 2u);
    EXPECT_EQ(lines.back(), ReferenceLabel(numbers)) << lines[0];
    if (lines.back() != "impossible") {
      EXPECT_TRUE(lines[lines.size() - 2].ends_with("= 24 (left: 24)")) << lines[0];
    }
    ++labels[lines.back()];
  }
  EXPECT_GT(labels["sure"], 20);
  EXPECT_GT(labels["likely"], 10);
  EXPECT_GT(labels["impossible"], 20);
}

TEST(CorpusTest, Game24ProposalsAreLegalSteps) {
  const std::regex step(R"(^(\d+) ([-+*/]) (\d+) = (\d+) \(left: ([\d ]+)\)$)");
  for (uint64_t i = 0; i < 100; ++i) {
    CorpusRng rng(4, i);
    const std::vector<std::string> lines = Lines(GenerateGame24Propose(rng));
    ASSERT_TRUE(lines[0].starts_with("Input: "));
    ASSERT_EQ(lines[1], "Possible next steps:");
    const std::vector<long> input = Numbers(lines[0].substr(7));
    ASSERT_GE(lines.size(), 3u);
    for (std::size_t l = 2; l < lines.size(); ++l) {
      std::smatch m;
      ASSERT_TRUE(std::regex_match(lines[l], m, step)) << lines[l];
      const long x = std::stol(m[1]), y = std::stol(m[3]), z = std::stol(m[4]);
      const char op = m[2].str()[0];
      const long expect = op == '+' ? x + y : op == '-' ? x - y : op == '*' ? x * y : x / y;
      if (op == '/') {
        EXPECT_EQ(x % y, 0) << lines[l];
      }
      EXPECT_EQ(z, expect) << lines[l];
      std::multiset<long> left(input.begin(), input.end());
      ASSERT_TRUE(left.count(x)) << lines[l];
      left.erase(left.find(x));
      ASSERT_TRUE(left.count(y)) << lines[l];
      left.erase(left.find(y));
      left.insert(z);
      const std::vector<long> shown = Numbers(m[5]);
      EXPECT_EQ(shown, std::vector<long>(left.begin(), left.end())) << lines[l];
    }
  }
}

TEST(CorpusTest, StoriesReuseTheirCharactersNames) {
  const Lexicon& lex = StoryLexicon();
  std::set<std::string> names(lex.female_names.begin(), lex.female_names.end());
  names.insert(lex.male_names.begin(), lex.male_names.end());
  for (uint64_t i = 0; i < 100; ++i) {
    CorpusRng rng(2, i);
    const std::string story = GenerateStory(rng);
    EXPECT_EQ(story.find("\n\n"), std::string::npos);
    std::map<std::string, int> uses;
    std::string word;
    for (char ch : story + " ") {
      if (std::isalpha(static_cast<unsigned char>(ch))) {
        word += ch;
      } else if (!word.empty()) {
        if (names.count(word)) ++uses[word];
        word.clear();
      }
    }
    ASSERT_GE(uses.size(), 2u) << story;
    EXPECT_LE(uses.size(), 3u) << story;
    int max_uses = 0;
    for (const auto& [name, n] : uses) max_uses = std::max(max_uses, n);
    EXPECT_GE(max_uses, 3) << story;  // the protagonist recurs across sentences
    EXPECT_NE(story.find('"'), std::string::npos) << story;  // dialogue
  }
}

TEST(CorpusTest, FileErrorsNameThePath) {
  const std::string missing = testing::TempPath("no_such_corpus");
  try {
    ReadCorpusFile(missing, kCorpusTrainFile);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  const std::string empty_dir = testing::TempPath("empty_corpus");
  std::filesystem::create_directories(empty_dir);
  EXPECT_THROW(ReadCorpusFile(empty_dir, kCorpusTrainFile), Error);
  std::ofstream(std::filesystem::path(empty_dir) / kCorpusTrainFile).flush();
  try {
    ReadCorpusFile(empty_dir, kCorpusTrainFile);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is empty"), std::string::npos) << e.what();
  }
  // A directory cannot be created under a regular file.
  const std::string file = testing::TempPath("plain_file");
  std::ofstream(file) << "x";
  EXPECT_THROW(WriteCorpusFiles(GenerateCorpus({.seed = 1, .target_words = 10}), file + "/sub"),
               Error);
  EXPECT_THROW(GenerateCorpus({.seed = 1, .target_words = 0}), Error);
}

// A corpus part that is a FIFO (or a device) fails at once, naming it, instead of blocking the
// trainer until something writes to it (base/text_file.h's checks).
TEST(CorpusTest, AFifoAsACorpusPartFailsAtOnce) {
  const std::string dir = testing::TempPath("fifo_corpus");
  std::filesystem::create_directories(dir);
  const std::string part = (std::filesystem::path(dir) / kCorpusTrainFile).string();
  ASSERT_EQ(::mkfifo(part.c_str(), 0644), 0);
  const auto start = std::chrono::steady_clock::now();
  try {
    ReadCorpusFile(dir, kCorpusTrainFile);
    FAIL() << "read a FIFO";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot read corpus file '" + part + "': it is not a regular file");
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
}  // namespace grove
