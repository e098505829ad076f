// Packed matrices kept between runs (model/packed_weight_cache.h): a load maps what an earlier one
// packed and computes the same bits; a file that changed, a damaged or foreign kept file, and a
// directory that cannot be written each fall back to packing, and the budget removes the least
// recently used files.
#include "model/packed_weight_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/thread_pool.h"
#include "model/model.h"
#include "model/model_parameters.h"
#include "model/random_model.h"
#include "test_support.h"

namespace grove {
namespace {

namespace fs = std::filesystem;

// Points the user's cache directory (base/user_cache_directory.h) at `dir` for a scope; ctest runs
// every test with it set and empty (no caching), which is restored after.
class CacheDirectory {
 public:
  explicit CacheDirectory(const std::string& dir) {
    if (const char* old = std::getenv("GROVE_CACHE_DIR")) old_ = old;
    ::setenv("GROVE_CACHE_DIR", dir.c_str(), 1);
  }
  CacheDirectory(const CacheDirectory&) = delete;
  CacheDirectory& operator=(const CacheDirectory&) = delete;
  ~CacheDirectory() {
    if (old_) {
      ::setenv("GROVE_CACHE_DIR", old_->c_str(), 1);
    } else {
      ::unsetenv("GROVE_CACHE_DIR");
    }
  }

 private:
  std::optional<std::string> old_;
};

// Collects what grove logs for a scope (test binaries log nowhere otherwise).
class LogCapture {
 public:
  LogCapture() {
    SetLogCallback([this](LogLevel, std::string_view message) {
      text_ += message;
      text_ += '\n';
    });
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  ~LogCapture() { SetLogCallback(nullptr); }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// Writes over path in place (the same inode, truncated).
template <typename Bytes>
void WriteBytes(const std::string& path, const Bytes& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

// Flips the bits `mask` of the byte at `at` of the file at `path`, in place.
void FlipBits(const std::string& path, uint64_t at, uint8_t mask) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr) << path;
  std::fseek(f, static_cast<long>(at), SEEK_SET);
  const int c = std::fgetc(f);
  std::fseek(f, static_cast<long>(at), SEEK_SET);
  std::fputc(c ^ mask, f);
  std::fclose(f);
}

std::vector<fs::path> KeptFiles(const std::string& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().starts_with("packed-")) files.push_back(e.path());
  }
  return files;
}

// Logits of every position of a fixed prompt.
std::vector<float> PromptLogits(Model& model) {
  Batch batch;
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 9; ++i) tokens.push_back((i * 37 + 5) % model.config().n_vocab);
  batch.AddChain(tokens, 0, 0, /*all_logits=*/true);
  const std::span<const float> logits = model.Forward(batch);
  return {logits.begin(), logits.end()};
}

std::unique_ptr<Model> LoadModel(const std::string& path) {
  return Model::Load(path, {.n_threads = 2, .n_ctx = 64});
}

// The logits of `path` loaded with no cache at all (packed here, every scale checked).
std::vector<float> LogitsWithoutCache(const std::string& path) {
  CacheDirectory none("");
  auto model = LoadModel(path);
  EXPECT_FALSE(model->parameters()->packed_weights_kept());
  return PromptLogits(*model);
}

// Loads path and checks whether it mapped kept packed weights, and that it computes `logits`.
void ExpectLoad(const std::string& path, bool kept, const std::vector<float>& logits) {
  auto model = LoadModel(path);
  EXPECT_EQ(model->parameters()->packed_weights_kept(), kept);
  EXPECT_EQ(PromptLogits(*model), logits);
}

// A kernel level without group kernels packs nothing, and then nothing is kept.
bool Packs(const std::string& path) {
  CacheDirectory none("");
  return LoadModel(path)->parameters()->grouped_bytes() > 0;
}

void SetModified(const fs::path& path, std::time_t when) {
  const struct timespec times[2] = {{when, 0}, {when, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

class PackedWeightsKept : public ::testing::TestWithParam<GgmlType> {};

TEST_P(PackedWeightsKept, ASecondLoadMapsWhatTheFirstPackedAndComputesTheSameBits) {
  RandomModelSpec spec = testing::TinySpec(GetParam());
  spec.n_embd = 256;  // a Q4_K super-block
  spec.n_ff = 512;
  const std::string path = testing::TempPath("kept.gguf");
  RandomModelWriter(spec).WriteFile(path);
  if (!Packs(path)) GTEST_SKIP() << "these kernels pack no " << GgmlTypeName(GetParam());
  const std::vector<float> expected = LogitsWithoutCache(path);

  const std::string dir = testing::TempPath("cache");
  CacheDirectory cache(dir);
  // Its packed weights are written beside it, and kept once it is gone.
  ExpectLoad(path, /*kept=*/false, expected);
  ASSERT_EQ(KeptFiles(dir).size(), 1u);
  {
    auto second = LoadModel(path);
    EXPECT_TRUE(second->parameters()->packed_weights_kept());
    EXPECT_EQ(PromptLogits(*second), expected);
    // A second map of the same file while the first is in use (as another process would).
    ExpectLoad(path, /*kept=*/true, expected);
  }
  EXPECT_EQ(KeptFiles(dir).size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(GroupedTypes, PackedWeightsKept,
                         ::testing::Values(GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K,
                                           GgmlType::kF16),
                         [](const auto& info) { return std::string(GgmlTypeName(info.param)); });

// A model file rewritten in place (another seed: the same inode and size, the modification time
// set back) is packed again, and its new weights are what the model computes with.
TEST(PackedWeightCache, AModelFileRewrittenIsPackedAgain) {
  const std::string path = testing::TempPath("rewritten.gguf");
  RandomModelWriter(testing::TinySpec(GgmlType::kQ8_0, 1)).WriteFile(path);
  if (!Packs(path)) GTEST_SKIP() << "these kernels pack no q8_0";
  const std::string dir = testing::TempPath("cache");
  CacheDirectory cache(dir);
  LoadModel(path);
  SetModified(path, std::time(nullptr) - 100);  // the first file's modification time, set apart
  LoadModel(path);
  ASSERT_TRUE(LoadModel(path)->parameters()->packed_weights_kept());

  // Rewritten in place, its size and modification time then set back (as `cp -p` onto it does):
  // only the status-change time tells it from the file packed before.
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  WriteBytes(path, RandomModelWriter(testing::TinySpec(GgmlType::kQ8_0, 2)).WriteToBytes());
  SetModified(path, before.st_mtim.tv_sec);
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  ASSERT_EQ(after.st_ino, before.st_ino);  // the same file, rewritten
  ASSERT_EQ(after.st_size, before.st_size);
  const std::vector<float> expected = LogitsWithoutCache(path);
  {
    // Told apart by its key, not caught by the check of the kept file's groups (a warning).
    LogCapture log;
    ExpectLoad(path, /*kept=*/false, expected);
    EXPECT_EQ(log.text().find("ignoring the packed weights"), std::string::npos) << log.text();
  }
  ExpectLoad(path, /*kept=*/true, expected);
}

// A kept file cut short, or one whose first packed group was changed, is ignored with a one-line
// warning naming it; the model is packed again, computes the right bits, and the file is rewritten.
TEST(PackedWeightCache, ADamagedKeptFileIsIgnoredWithAWarningAndRewritten) {
  const std::string path = testing::TempPath("damaged.gguf");
  RandomModelWriter(testing::TinySpec(GgmlType::kQ8_0)).WriteFile(path);
  if (!Packs(path)) GTEST_SKIP() << "these kernels pack no q8_0";
  const std::vector<float> expected = LogitsWithoutCache(path);
  const std::string dir = testing::TempPath("cache");
  CacheDirectory cache(dir);
  LoadModel(path);
  ASSERT_EQ(KeptFiles(dir).size(), 1u);
  const fs::path kept = KeptFiles(dir)[0];
  const auto size = fs::file_size(kept);

  struct Damage {
    const char* what;
    std::function<void()> apply;
    const char* warning;
  };
  const Damage damages[] = {
      {"cut short", [&] { fs::resize_file(kept, size - 100); }, "packed bytes, not"},
      // The first matrix's first group.
      {"a packed byte changed", [&] { FlipBits(kept, PackedWeightCache::kHeaderBytes + 10, 0x40); },
       "differs from a fresh pack"},
      // Between the groups the load compares with a fresh pack (or in one: either way the kept
      // file is refused, never computed with).
      {"a packed byte in the middle changed",
       [&] {
         FlipBits(kept,
                  PackedWeightCache::kHeaderBytes + (size - PackedWeightCache::kHeaderBytes) / 2,
                  0x01);
       },
       "they will be packed again"},
      {"not a kept file", [&] { WriteBytes(kept.string(), std::string("hello")); },
       "not a packed-weights file"},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.what);
    d.apply();
    {
      LogCapture log;
      auto model = LoadModel(path);
      const std::string& err = log.text();
      EXPECT_FALSE(model->parameters()->packed_weights_kept());
      EXPECT_NE(err.find("ignoring the packed weights '" + kept.string() + "'"), std::string::npos)
          << err;
      EXPECT_NE(err.find(d.warning), std::string::npos) << err;
      EXPECT_EQ(PromptLogits(*model), expected);
    }
    EXPECT_EQ(fs::file_size(kept), size);  // rewritten whole once the model is gone
    EXPECT_TRUE(LoadModel(path)->parameters()->packed_weights_kept());
  }
}

// No cache directory that can be written: the model loads, packed here, nothing kept, no error.
TEST(PackedWeightCache, ADirectoryThatCannotBeWrittenMeansNoCaching) {
  const std::string path = testing::TempPath("unwritable.gguf");
  RandomModelWriter(testing::TinySpec(GgmlType::kQ8_0)).WriteFile(path);
  const std::string file = testing::TempPath("a-file");
  WriteBytes(file, std::string("not a directory"));
  CacheDirectory cache(file + "/sub");
  EXPECT_FALSE(LoadModel(path)->parameters()->packed_weights_kept());
  EXPECT_FALSE(LoadModel(path)->parameters()->packed_weights_kept());
}

// Beyond its budget the cache removes the least recently used files, an Open counting as a use;
// Open refuses a file of another size or another key.
TEST(PackedWeightCache, RemovesTheLeastRecentlyUsedBeyondItsBudget) {
  const std::string dir = testing::TempPath("budget");
  const std::vector<uint8_t> bytes(1000, 7);
  const uint64_t file_bytes = PackedWeightCache::kHeaderBytes + bytes.size();
  const PackedWeightCache cache(dir, 3 * file_bytes);
  const std::time_t now = std::time(nullptr);
  for (const char* key : {"a", "b", "c"}) cache.Store(key, bytes.data(), bytes.size());
  SetModified(cache.PathFor("a"), now - 300);
  SetModified(cache.PathFor("b"), now - 200);
  SetModified(cache.PathFor("c"), now - 100);
  ASSERT_NE(cache.Open("a", bytes.size()), nullptr);  // a is now the most recently used
  cache.Store("d", bytes.data(), bytes.size());
  EXPECT_TRUE(fs::exists(cache.PathFor("a")));
  EXPECT_FALSE(fs::exists(cache.PathFor("b")));
  EXPECT_TRUE(fs::exists(cache.PathFor("c")));
  EXPECT_TRUE(fs::exists(cache.PathFor("d")));
  auto kept = cache.Open("d", bytes.size());
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(std::vector<uint8_t>(kept->data(), kept->data() + kept->size()), bytes);

  LogCapture log;
  EXPECT_EQ(cache.Open("d", bytes.size() + 64), nullptr);
  fs::copy_file(cache.PathFor("c"), cache.PathFor("e"));
  EXPECT_EQ(cache.Open("e", bytes.size()), nullptr);
  const std::string& err = log.text();
  EXPECT_NE(err.find("packed bytes, not"), std::string::npos) << err;
  EXPECT_NE(err.find("packed under another key"), std::string::npos) << err;
  // What a writer killed an hour ago left is removed; a younger one may still be written.
  const std::string old_partial = cache.PathFor("g") + ".a1b2c3.partial";
  const std::string new_partial = cache.PathFor("h") + ".d4e5f6.partial";
  WriteBytes(old_partial, std::string("half"));
  WriteBytes(new_partial, std::string("half"));
  SetModified(old_partial, now - 2 * 3600);
  cache.Store("i", bytes.data(), bytes.size());
  EXPECT_FALSE(fs::exists(old_partial));
  EXPECT_TRUE(fs::exists(new_partial));
  // Files larger than the budget are not kept.
  const std::vector<uint8_t> large(4 * file_bytes, 1);
  cache.Store("f", large.data(), large.size());
  EXPECT_FALSE(fs::exists(cache.PathFor("f")));
}

// The header's checksum covers every packed byte: a bit flipped anywhere, or two chunks swapped,
// and the kept file no longer matches; put back, it does again.
TEST(PackedWeightCache, TheChecksumSeesABitFlippedAnywhereAndChunksSwapped) {
  const std::string dir = testing::TempPath("checksum");
  std::vector<uint8_t> bytes((std::size_t{3} << 20) + 77);  // three chunks and a part
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 29 + i / 997);
  const PackedWeightCache cache(dir);
  ASSERT_TRUE(cache.Store("k", bytes.data(), bytes.size()));
  ThreadPool pool(2);
  const std::string path = cache.PathFor("k");
  auto flip = [&](uint64_t at, uint8_t mask) {
    FlipBits(path, PackedWeightCache::kHeaderBytes + at, mask);
  };
  ASSERT_TRUE(cache.Open("k", bytes.size())->ChecksumMatches(pool));
  for (const uint64_t at : {uint64_t{0}, uint64_t{1} << 20, bytes.size() / 2, bytes.size() - 1}) {
    SCOPED_TRACE(at);
    flip(at, 0x10);
    EXPECT_FALSE(cache.Open("k", bytes.size())->ChecksumMatches(pool));
    flip(at, 0x10);
    EXPECT_TRUE(cache.Open("k", bytes.size())->ChecksumMatches(pool));
  }
  std::vector<uint8_t> swapped = bytes;
  std::swap_ranges(swapped.begin(), swapped.begin() + (1 << 20), swapped.begin() + (1 << 20));
  EXPECT_NE(PackedBytesChecksum(swapped.data(), swapped.size()),
            PackedBytesChecksum(bytes.data(), bytes.size()));
  EXPECT_EQ(PackedBytesChecksum(bytes.data(), bytes.size(), &pool),
            PackedBytesChecksum(bytes.data(), bytes.size()));
}

// Every field of the key changes it, and the file's owner and mode (which decide whether it is
// read, not what it holds) do not: a field left out of the key would map packs made for another
// file, layer range, kernel level, layout or build.
TEST(PackedWeightCache, EveryFieldOfTheKeyChangesIt) {
  const PackedWeightsKeyFields base{.file = {.device = 1,
                                             .inode = 2,
                                             .size = 3,
                                             .modified_ns = 4,
                                             .changed_ns = 5,
                                             .owner = 6,
                                             .mode = 0600},
                                    .first_layer = 0,
                                    .last_layer = 8,
                                    .kernels = "avx512_vnni",
                                    .layout_version = 1,
                                    .layout = 0x1234,
                                    .build = "abcd"};
  const std::string key = PackedWeightsKey(base);
  const std::vector<std::pair<const char*, std::function<void(PackedWeightsKeyFields&)>>> changes =
      {{"device", [](auto& f) { f.file.device = 9; }},
       {"inode", [](auto& f) { f.file.inode = 9; }},
       {"size", [](auto& f) { f.file.size = 9; }},
       {"modified", [](auto& f) { f.file.modified_ns = 9; }},
       {"changed", [](auto& f) { f.file.changed_ns = 9; }},
       {"first layer", [](auto& f) { f.first_layer = 1; }},
       {"last layer", [](auto& f) { f.last_layer = 7; }},
       {"kernels", [](auto& f) { f.kernels = "avx2"; }},
       {"layout version", [](auto& f) { f.layout_version = 2; }},
       {"layout", [](auto& f) { f.layout = 0x1235; }},
       {"build", [](auto& f) { f.build = "abce"; }}};
  for (const auto& [field, change] : changes) {
    PackedWeightsKeyFields changed = base;
    change(changed);
    EXPECT_NE(PackedWeightsKey(changed), key) << field;
  }
  PackedWeightsKeyFields other_owner = base;
  other_owner.file.owner = 7;
  other_owner.file.mode = 0644;
  EXPECT_EQ(PackedWeightsKey(other_owner), key);
}

// Only the user's own kept files are read: a link planted in their place, or a file others may
// write, is refused with a warning and packed again (a cache directory shared through
// GROVE_CACHE_DIR must not let another user choose the weights).
TEST(PackedWeightCache, ALinkOrAFileOthersMayWriteIsNotRead) {
  const std::string dir = testing::TempPath("planted");
  const std::vector<uint8_t> bytes(1000, 7);
  const PackedWeightCache cache(dir);
  ASSERT_TRUE(cache.Store("a", bytes.data(), bytes.size()));
  ASSERT_NE(cache.Open("a", bytes.size()), nullptr);
  LogCapture log;
  fs::permissions(cache.PathFor("a"), fs::perms::group_write, fs::perm_options::add);
  EXPECT_EQ(cache.Open("a", bytes.size()), nullptr);
  EXPECT_NE(log.text().find("writable by others"), std::string::npos) << log.text();
  fs::rename(cache.PathFor("a"), dir + "/elsewhere.bin");
  fs::create_symlink(dir + "/elsewhere.bin", cache.PathFor("a"));
  EXPECT_EQ(cache.Open("a", bytes.size()), nullptr);
  EXPECT_NE(log.text().find("symbolic links"), std::string::npos) << log.text();
  // Store replaces the link with a file of its own, leaving the link's target alone.
  ASSERT_TRUE(cache.Store("a", bytes.data(), bytes.size()));
  EXPECT_NE(cache.Open("a", bytes.size()), nullptr);
  EXPECT_TRUE(fs::exists(dir + "/elsewhere.bin"));
}

// A writer in the background and one that writes everything at Finish keep the same file, and no
// temporary; whatever share of the chunks the idle thread wrote before Finish.
TEST(PackedWeightCache, AWriterKeepsTheWholeFileWhoeverWritesItsChunks) {
  const std::string dir = testing::TempPath("writer");
  std::vector<uint8_t> bytes((std::size_t{5} << 20) + 123);  // five chunks and a part
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + i / 4096);
  const PackedWeightCache cache(dir);
  for (const bool background : {false, true}) {
    SCOPED_TRACE(background ? "background" : "at Finish");
    const std::string key = background ? "b" : "f";
    PackedWeightWriter writer(cache, key, bytes.data(), bytes.size(), background);
    EXPECT_TRUE(writer.Finish());
    EXPECT_TRUE(writer.Finish());  // once
    EXPECT_FALSE(testing::PartialFileLeft(cache.PathFor(key)));
    auto kept = cache.Open(key, bytes.size());
    ASSERT_NE(kept, nullptr);
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), kept->data()));
  }
}

// An abandoned writer keeps nothing and leaves no temporary, and Finish then writes nothing more
// (what a server does to a drafter it swaps out: closing it must not write the rest on the
// scheduler's thread). Unless the idle thread had written every chunk: then the file is whole and
// stays.
TEST(PackedWeightCache, AnAbandonedWriterKeepsNothingAndWritesNoMore) {
  const std::string dir = testing::TempPath("abandoned");
  std::vector<uint8_t> bytes((std::size_t{64} << 20) + 5);  // 64 chunks and a part
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 13 + 1);
  const PackedWeightCache cache(dir);
  for (const bool background : {false, true}) {
    SCOPED_TRACE(background ? "background" : "at Finish");
    const std::string key = background ? "b" : "f";
    PackedWeightWriter writer(cache, key, bytes.data(), bytes.size(), background);
    writer.Abandon();
    const bool kept = writer.Finish();
    EXPECT_FALSE(testing::PartialFileLeft(cache.PathFor(key)));
    auto file = cache.Open(key, bytes.size());
    EXPECT_EQ(file != nullptr, kept);
    if (!background) {
      EXPECT_FALSE(kept);  // nothing was written before Abandon
    }
    if (file) {
      EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), file->data()));
    }
  }
}

}  // namespace
}  // namespace grove
