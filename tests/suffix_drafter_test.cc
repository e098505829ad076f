// Suffix drafting: the index counts every substring of at most max_depth tokens exactly as a
// brute-force count over the documents it holds does, before and after documents are removed (and
// frees every node once none is left); the longest match is the longest suffix with a next token;
// the store evicts its oldest documents to stay within its budget; the drafter ranks next tokens
// by how often they followed, from its own sequence and from the outputs before it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <vector>

#include "base/error.h"
#include "speculate/suffix_drafter.h"
#include "speculate/suffix_index.h"
#include "speculate/suffix_store.h"
#include "speculate/token_tree.h"
#include "speculate/tree_builder.h"
#include "speculate/tree_plan.h"
#include "test_support.h"

namespace grove {
namespace {

using Text = std::vector<int32_t>;

// Occurrences of every substring of 1..depth tokens in `documents`.
std::map<Text, int32_t> BruteCounts(const std::vector<Text>& documents, int32_t depth) {
  std::map<Text, int32_t> counts;
  for (const Text& d : documents) {
    for (std::size_t i = 0; i < d.size(); ++i) {
      for (std::size_t n = 1; n <= static_cast<std::size_t>(depth) && i + n <= d.size(); ++n)
        ++counts[Text(d.begin() + i, d.begin() + i + n)];
    }
  }
  return counts;
}

// What followed `text` in the index, when `text` is its longest match (else nothing).
std::map<int32_t, int32_t> NextCounts(const SuffixIndex& index, const Text& text) {
  std::map<int32_t, int32_t> next;
  const SuffixIndex::Match m = index.LongestMatch(text);
  if (m.length != static_cast<int32_t>(text.size())) return next;
  index.ForEachNext(m.node, [&](int32_t t, int32_t c) { next[t] = c; });
  return next;
}

// Every substring s of up to depth - 1 tokens with a next token: the index's next-token counts
// after s equal the brute-force counts of s + t.
void ExpectCountsMatch(const SuffixIndex& index, const std::vector<Text>& documents) {
  const int32_t depth = index.max_depth();
  const std::map<Text, int32_t> brute = BruteCounts(documents, depth);
  int64_t tokens = 0;
  for (const Text& d : documents) tokens += static_cast<int64_t>(d.size());
  EXPECT_EQ(index.count(SuffixIndex::kRoot), tokens);
  // One node per distinct substring, and the root.
  EXPECT_EQ(index.live_nodes(), static_cast<int64_t>(brute.size()) + 1);
  for (const auto& [s, count] : brute) {
    if (static_cast<int32_t>(s.size()) >= depth) continue;
    std::map<int32_t, int32_t> want;
    for (auto it = brute.lower_bound(s); it != brute.end(); ++it) {
      const Text& longer = it->first;
      if (longer.size() < s.size() || !std::equal(s.begin(), s.end(), longer.begin())) break;
      if (longer.size() == s.size() + 1) want[longer.back()] = it->second;
    }
    if (want.empty()) continue;  // s only ends documents: no match for it
    ASSERT_EQ(NextCounts(index, s), want) << "after a text of " << s.size() << " tokens";
  }
}

std::vector<Text> RandomDocuments(int n, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Text> docs(n);
  for (Text& d : docs) {
    d.resize(5 + rng() % 40);
    for (int32_t& t : d) t = static_cast<int32_t>(rng() % vocab);  // few tokens: many repeats
  }
  return docs;
}

TEST(SuffixIndex, CountsEverySubstringAndForgetsRemovedDocuments) {
  for (int32_t depth : {2, 4, 7}) {
    SCOPED_TRACE("depth " + std::to_string(depth));
    SuffixIndex index(depth);
    std::vector<Text> docs = RandomDocuments(12, 3, 40 + depth);
    docs.push_back(Text(30, 1));  // one token repeated: every suffix is a prefix too
    for (const Text& d : docs) index.Add(d);
    ExpectCountsMatch(index, docs);
    // Remove every other document, oldest first, then the rest.
    std::vector<Text> kept;
    for (std::size_t i = 0; i < docs.size(); ++i) {
      if (i % 2 == 0) {
        index.Remove(docs[i]);
      } else {
        kept.push_back(docs[i]);
      }
    }
    ExpectCountsMatch(index, kept);
    for (const Text& d : kept) index.Remove(d);
    EXPECT_EQ(index.live_nodes(), 1);  // nothing leaked
    EXPECT_EQ(index.count(SuffixIndex::kRoot), 0);
    // Freed nodes are reused: the same documents again count the same.
    for (const Text& d : docs) index.Add(d);
    ExpectCountsMatch(index, docs);
  }
}

TEST(SuffixIndex, AppendingTokenByTokenCountsAsAddingTheWhole) {
  const std::vector<Text> docs = RandomDocuments(4, 4, 7);
  SuffixIndex whole(5), grown(5);
  for (const Text& d : docs) {
    whole.Add(d);
    SuffixIndex::Cursor cursor;
    for (int32_t t : d) grown.Append(cursor, t);
  }
  ExpectCountsMatch(grown, docs);
  EXPECT_EQ(grown.live_nodes(), whole.live_nodes());
}

TEST(SuffixIndex, LongestMatchIsTheLongestSuffixWithANextToken) {
  SuffixIndex index(4);
  index.Add(Text{1, 2, 3, 4, 9});
  index.Add(Text{7, 3, 4, 5});
  // "2 3 4" was followed by 9 (3 tokens, the most a depth of 4 matches).
  SuffixIndex::Match m = index.LongestMatch(Text{8, 1, 2, 3, 4});
  EXPECT_EQ(m.length, 3);
  EXPECT_EQ(NextCounts(index, Text{2, 3, 4}), (std::map<int32_t, int32_t>{{9, 1}}));
  // "6 3 4": "3 4" was followed by 9 and 5.
  m = index.LongestMatch(Text{6, 3, 4});
  EXPECT_EQ(m.length, 2);
  std::map<int32_t, int32_t> next;
  index.ForEachNext(m.node, [&](int32_t t, int32_t c) { next[t] = c; });
  EXPECT_EQ(next, (std::map<int32_t, int32_t>{{5, 1}, {9, 1}}));
  // "4 5" ends a document: only "5" could match, and nothing followed it either.
  EXPECT_EQ(index.LongestMatch(Text{4, 5}).node, -1);
  EXPECT_EQ(index.LongestMatch(Text{}).node, -1);
  EXPECT_THROW(index.Remove(Text{1, 8}), Error);
}

TEST(SuffixStore, EvictsTheOldestDocumentsToStayInItsBudget) {
  const std::size_t budget = 200 * SuffixIndex::kBytesPerNode;
  SuffixStore store({.max_depth = 4, .max_bytes = budget});
  const std::vector<Text> docs = RandomDocuments(40, 50, 3);
  for (const Text& d : docs) {
    store.Add(d);
    EXPECT_LE(store.bytes(), budget);
  }
  const int64_t held = store.documents();
  EXPECT_GT(held, 0);
  EXPECT_LT(held, 40);
  // What is held is the newest documents: the last one's text is matched, the first one's not.
  const Text& last = docs.back();
  const Text tail(last.end() - 3, last.end() - 1);
  EXPECT_GE(store.Read([&](const SuffixIndex& i) { return i.LongestMatch(tail).length; }), 1);
  // A document larger than the whole budget keeps its tail.
  Text huge(5000);
  for (std::size_t i = 0; i < huge.size(); ++i) huge[i] = static_cast<int32_t>(100 + i);
  store.Add(huge);
  EXPECT_LE(store.documents(), held);
  EXPECT_LE(store.bytes(), budget);
  EXPECT_EQ(store.Read([](const SuffixIndex& i) { return i.LongestMatch(Text{5098}).length; }), 1);
  EXPECT_EQ(store.Read([](const SuffixIndex& i) { return i.LongestMatch(Text{100}).node; }), -1);
}

// Cleared, a store holds nothing and matches nothing (a benchmark's repetitions each start so),
// and keeps what it is given next.
TEST(SuffixStore, ClearForgetsEveryDocument) {
  SuffixStore store({.max_depth = 4});
  const Text doc = {5, 6, 7, 8, 9};
  store.Add(doc);
  store.Add(doc);
  ASSERT_EQ(store.Read([](const SuffixIndex& i) { return i.LongestMatch(Text{5, 6}).length; }), 2);
  store.Clear();
  EXPECT_EQ(store.documents(), 0);
  EXPECT_EQ(store.Read([](const SuffixIndex& i) { return i.LongestMatch(Text{5, 6}).node; }), -1);
  EXPECT_EQ(store.Read([](const SuffixIndex& i) { return i.count(0); }), 0);
  store.Add(Text{1, 2, 3});
  EXPECT_EQ(store.documents(), 1);
  EXPECT_EQ(store.Read([](const SuffixIndex& i) { return i.LongestMatch(Text{1, 2}).length; }), 2);
}

TEST(SuffixStore, SavesAndLoadsItsDocumentsAndRefusesOtherFiles) {
  const std::string path = testing::TempPath("suffix-store.bin");
  SuffixStore store({.max_depth = 5});
  const std::vector<Text> docs = RandomDocuments(6, 7, 11);
  for (const Text& d : docs) store.Add(d);
  store.Save(path, 42);
  SuffixStore loaded({.max_depth = 5});
  EXPECT_EQ(loaded.Load(path, 42, 7), 6);
  EXPECT_EQ(loaded.documents(), 6);
  loaded.Read([&](const SuffixIndex& index) {
    ExpectCountsMatch(index, docs);
    return 0;
  });
  // Another vocabulary's, ids beyond this one's, not a store, truncated: refused, nothing added.
  SuffixStore other;
  EXPECT_THROW(other.Load(path, 43, 7), Error);
  EXPECT_THROW(other.Load(path, 42, 6), Error);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (const std::string& damaged :
       {std::string("not a store"), bytes.substr(0, bytes.size() - 2), bytes + "x"}) {
    std::ofstream(path, std::ios::binary) << damaged;
    EXPECT_THROW(other.Load(path, 42, 7), Error);
  }
  EXPECT_EQ(other.documents(), 0);
  std::remove(path.c_str());
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The message of the grove::Error f throws ("" when it throws none).
template <class F>
std::string ErrorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A store replaces only a store (`serve --suffix-store DRAFT.gguf` once made the draft 24
// bytes): another file, an empty one, a link (even to a store), a directory or a FIFO is left as
// it is, with an error naming it; loading another file reads no more of it than its first bytes.
TEST(SuffixStore, ReplacesOnlyAStoreOfItsOwn) {
  const std::string dir = testing::TempPath("suffix-store-own");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  SuffixStore store({.max_depth = 4});
  store.Add(Text{1, 2, 3});
  const std::string own = dir + "/store.bin";
  store.Save(own, 7);
  store.Add(Text{4, 5});
  EXPECT_NO_THROW(store.Save(own, 7));  // a store is replaced
  EXPECT_EQ(SuffixStore({.max_depth = 4}).Load(own, 7, 8), 2);
  const std::string draft = dir + "/draft.gguf";
  const std::string gguf = std::string("GGUF\x03\0\0\0", 8) + std::string(1000, 'w');
  std::ofstream(draft, std::ios::binary) << gguf;
  const std::string empty = dir + "/empty.bin";
  std::ofstream(empty, std::ios::binary).flush();
  const std::string link = dir + "/link.bin";
  std::filesystem::create_symlink(own, link);
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string own_bytes = FileBytes(own);
  for (const std::string& path : {draft, empty, link, fifo, dir}) {
    SCOPED_TRACE(path);
    const std::string error = ErrorOf([&] { store.Save(path, 7); });
    EXPECT_NE(error.find("will not replace '" + path + "' with a suffix store"), std::string::npos)
        << error;
    EXPECT_NE(error.find("left as it is"), std::string::npos) << error;
    EXPECT_THROW(SuffixStore::CheckReplaceable(path), Error);
  }
  EXPECT_EQ(FileBytes(draft), gguf);
  EXPECT_TRUE(std::filesystem::is_empty(empty));
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(FileBytes(own), own_bytes);  // the link's target too
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_NO_THROW(SuffixStore::CheckReplaceable(dir + "/absent.bin"));
  // Loading the draft fails without reading it, and says it stays as it is.
  SuffixStore other({.max_depth = 4});
  const std::string error = ErrorOf([&] { other.Load(draft, 7, 8); });
  EXPECT_NE(error.find("suffix store '" + draft + "': not a grove suffix store"), std::string::npos)
      << error;
  EXPECT_NE(error.find("left as it is"), std::string::npos) << error;
  EXPECT_EQ(other.documents(), 0);
  std::filesystem::remove_all(dir);
}

// A store file larger than a store of the loading one's budget writes is refused before it is
// read, whatever it claims to hold.
TEST(SuffixStore, RefusesAFileLargerThanItsBudgetWrites) {
  const std::string path = testing::TempPath("suffix-store-large.bin");
  const std::size_t budget = 64 * SuffixIndex::kBytesPerNode;
  SuffixStore big({.max_depth = 4});
  big.Add(RandomDocuments(1, 1000, 5).front());
  Text long_document(4000);
  for (std::size_t i = 0; i < long_document.size(); ++i)
    long_document[i] = static_cast<int32_t>(i % 1000);
  big.Add(long_document);
  big.Save(path, 9);
  ASSERT_GT(std::filesystem::file_size(path), 24 + 2 * budget);
  SuffixStore small({.max_depth = 4, .max_bytes = budget});
  const std::string error = ErrorOf([&] { small.Load(path, 9, 1000); });
  EXPECT_NE(error.find("a store of this budget writes"), std::string::npos) << error;
  EXPECT_EQ(small.documents(), 0);
  // What such a store saves, it loads.
  small.Add(long_document);
  small.Save(path, 9);
  EXPECT_LE(std::filesystem::file_size(path), 24 + 2 * budget);
  EXPECT_EQ(SuffixStore({.max_depth = 4, .max_bytes = budget}).Load(path, 9, 1000), 1);
  std::remove(path.c_str());
}

constexpr int32_t kVocab = 12;

// The tokens of one Expand row with a finite logit, and their logits.
std::map<int32_t, float> Proposed(std::span<const float> rows, std::size_t row) {
  std::map<int32_t, float> out;
  for (int32_t t = 0; t < kVocab; ++t) {
    const float v = rows[row * kVocab + t];
    if (std::isfinite(v))
      out[t] = v;
    else
      EXPECT_TRUE(std::isinf(v) && v < 0);
  }
  return out;
}

TEST(SuffixDrafter, RanksNextTokensByHowOftenTheyFollowed) {
  SuffixDrafter d(kVocab, 64, nullptr);
  d.Reserve(4, 16);
  // After "1 2": 3 twice, 4 once.
  d.Begin(Text{1, 2, 3, 0, 1, 2, 4, 1, 2, 3, 5, 1, 2});
  TokenTree tree;
  const int32_t root[] = {-1};
  std::map<int32_t, float> row = Proposed(d.Expand(tree, root), 0);
  ASSERT_EQ(row.size(), 2u);
  EXPECT_FLOAT_EQ(row[3], std::log(2.0f));
  EXPECT_FLOAT_EQ(row[4], std::log(1.0f));
  // Below a node: "2 3" was followed by 0 and 5 once each.
  tree.AddChild(-1, 3, 1.0f);
  const int32_t level[] = {0};
  row = Proposed(d.Expand(tree, level), 0);
  EXPECT_EQ(row.size(), 2u);
  EXPECT_TRUE(row.count(0) && row.count(5));
  // Committing "3" then "5": the text now ends "3 5", matched as before.
  const int32_t accepted[] = {0};
  d.Commit(tree, accepted, 5);
  TokenTree empty;
  row = Proposed(d.Expand(empty, root), 0);
  EXPECT_EQ(row, (std::map<int32_t, float>{{1, 0.0f}}));
}

// The root's children as a greedy tree builder ranks them from d's rows: a star of `width`.
std::vector<int32_t> RankedChildren(Drafter& d, int32_t width) {
  const TreeBuilder builder(ChildDraw::kDeterministic, SamplerParams{.temperature = 0.0f});
  const TreePlan plan = ParseTreePlan("kconfig:" + std::to_string(width), {.max_tokens = 16});
  DraftState state = builder.NewState(kVocab);
  state.Reserve(plan, ChildDraw::kDeterministic);
  builder.Build(plan, d, CounterRng(1), 0, 0, state);
  std::vector<int32_t> tokens;
  for (const TreeNode& n : state.tree().nodes()) tokens.push_back(n.token);
  return tokens;
}

// Tokens that followed as often get the same logit exactly, and rank by id, the lower first,
// whichever followed first in the text: the same tree on every run and machine.
TEST(SuffixDrafter, EqualCountsRankTheLowerTokenFirst) {
  SuffixDrafter d(kVocab, 64, nullptr);
  d.Reserve(4, 16);
  // After "1 2": 9 twice (first), 4 twice, 6 once.
  d.Begin(Text{1, 2, 9, 1, 2, 4, 1, 2, 9, 1, 2, 6, 1, 2, 4, 0, 1, 2});
  TokenTree empty;
  const int32_t root[] = {-1};
  EXPECT_EQ(Proposed(d.Expand(empty, root), 0),
            (std::map<int32_t, float>{{4, std::log(2.0f)}, {6, 0.0f}, {9, std::log(2.0f)}}));
  EXPECT_EQ(RankedChildren(d, 3), (std::vector<int32_t>{4, 9, 6}));
  EXPECT_EQ(RankedChildren(d, 1), (std::vector<int32_t>{4}));
}

// A row comes from the index with the longer match; where the sequence's own text and the
// served outputs match equally long, their counts add up (and equal sums rank by id).
TEST(SuffixDrafter, MatchesOfEqualLengthAddTheirCounts) {
  const Text own_text = {7, 1, 2, 5, 8, 1, 2};  // "1 2" was followed by 5
  TokenTree empty;
  const int32_t root[] = {-1};
  {
    // Served: "1 2" followed by 6 twice; "8 1 2" never occurred. Both match "1 2".
    auto store = std::make_shared<SuffixStore>(SuffixStoreOptions{.max_depth = 4});
    store->Add(Text{4, 1, 2, 6, 4, 1, 2, 6, 3});
    SuffixDrafter d(kVocab, 64, store);
    d.Reserve(4, 16);
    d.Begin(own_text);
    EXPECT_EQ(Proposed(d.Expand(empty, root), 0),
              (std::map<int32_t, float>{{5, 0.0f}, {6, std::log(2.0f)}}));
    // Once more "1 2 5" served: 5 as often as 6 in all, and the lower first.
    store->Add(Text{3, 1, 2, 5});
    EXPECT_EQ(Proposed(d.Expand(empty, root), 0),
              (std::map<int32_t, float>{{5, std::log(2.0f)}, {6, std::log(2.0f)}}));
    EXPECT_EQ(RankedChildren(d, 2), (std::vector<int32_t>{5, 6}));
  }
  {
    // Served "8 1 2" followed by 6: the longer match alone makes the row.
    auto store = std::make_shared<SuffixStore>(SuffixStoreOptions{.max_depth = 4});
    store->Add(Text{8, 1, 2, 6, 1, 2, 5, 1, 2, 5});
    SuffixDrafter d(kVocab, 64, store);
    d.Reserve(4, 16);
    d.Begin(own_text);
    EXPECT_EQ(Proposed(d.Expand(empty, root), 0), (std::map<int32_t, float>{{6, 0.0f}}));
  }
  {
    // The sequence's own "8 1 2" was followed by 5; served only "1 2" (by 6): its own alone.
    auto store = std::make_shared<SuffixStore>(SuffixStoreOptions{.max_depth = 4});
    store->Add(Text{1, 2, 6, 1, 2, 6});
    SuffixDrafter d(kVocab, 64, store);
    d.Reserve(4, 16);
    d.Begin(Text{8, 1, 2, 5, 8, 1, 2});
    EXPECT_EQ(Proposed(d.Expand(empty, root), 0), (std::map<int32_t, float>{{5, 0.0f}}));
  }
}

// Each row says how many tokens of the text before its node the lookup matched.
TEST(SuffixDrafter, SaysHowLongEachRowsMatchWas) {
  SuffixDrafter d(kVocab, 64, nullptr);
  d.Reserve(4, 16);
  EXPECT_TRUE(d.matched_lengths().empty()) << "before any Expand";
  d.Begin(Text{1, 2, 3, 4, 5, 9, 1, 2, 3, 4, 5});
  TokenTree tree;
  const int32_t root[] = {-1};
  d.Expand(tree, root);
  // "1 2 3 4 5" was followed by 9 before.
  EXPECT_EQ(std::vector<int32_t>(d.matched_lengths().begin(), d.matched_lengths().end()),
            std::vector<int32_t>{5});
  // Below the root, a level of two: "1 2 3 4 5 9" was followed by 1; "5 7" never occurred, nor
  // did 7.
  tree.AddChild(-1, 9, 1.0f);
  tree.AddChild(-1, 7, 0.5f);
  const int32_t level[] = {0, 1};
  d.Expand(tree, level);
  EXPECT_EQ(std::vector<int32_t>(d.matched_lengths().begin(), d.matched_lengths().end()),
            (std::vector<int32_t>{6, 0}));
}

TEST(SuffixDrafter, DraftsFromTheOutputsOfEarlierSequences) {
  auto store = std::make_shared<SuffixStore>();
  const Text prompt = {9, 8, 7};
  TokenTree empty;
  const int32_t root[] = {-1};
  {
    SuffixDrafter first(kVocab, 64, store);
    first.Begin(prompt);
    EXPECT_TRUE(Proposed(first.Expand(empty, root), 0).empty());  // nothing known yet
    first.Commit(empty, {}, 1);
    first.Commit(empty, {}, 2);
    first.End();
  }
  EXPECT_EQ(store->documents(), 1);
  // The same prompt again: its end led into "1 2" before.
  SuffixDrafter second(kVocab, 64, store);
  second.Begin(prompt);
  EXPECT_EQ(Proposed(second.Expand(empty, root), 0), (std::map<int32_t, float>{{1, 0.0f}}));
  // A sequence abandoned before its end (no End) keeps nothing.
  second.Commit(empty, {}, 5);
  EXPECT_EQ(store->documents(), 1);
}

}  // namespace
}  // namespace grove
