// GGUF reader and writer: round trips, the shared real files, and one test per kind of malformed
// file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "base/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "test_support.h"

namespace grove {
namespace {

GgufWriter SampleWriter() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetUint32("u32", 7);
  w.SetInt32("i32", -3);
  w.SetFloat32("f32", 0.5f);
  w.SetBool("flag", true);
  w.SetUint64("u64", 1ull << 40);
  w.SetStringArray("strings", {"a", "", "ccc"});
  std::vector<float> floats = {1.0f, -2.5f};
  w.SetFloat32Array("floats", floats);
  std::vector<int32_t> ints = {1, -2, 3};
  w.SetInt32Array("ints", ints);
  std::vector<float> t(4 * 3);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(i);
  w.AddF32Tensor("t0", {4, 3}, t);
  w.AddTensor("t1", {32}, GgmlType::kQ8_0, std::vector<uint8_t>(34, 1));
  return w;
}

// Throws unless parsing fails with a message containing `needle`.
void ExpectParseError(const std::vector<uint8_t>& bytes, const std::string& needle) {
  try {
    GgufFile::FromBytes(bytes, "bad.gguf");
    FAIL() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.gguf"), std::string::npos)
        << "error must name the file";
  }
}

template <typename T>
void Poke(std::vector<uint8_t>& bytes, std::size_t offset, T value) {
  ASSERT_LE(offset + sizeof(T), bytes.size());
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

// Offset of the first occurrence of a byte string (to find a field to corrupt).
std::size_t Find(const std::vector<uint8_t>& bytes, const std::string& s) {
  auto it = std::search(bytes.begin(), bytes.end(), s.begin(), s.end());
  EXPECT_NE(it, bytes.end()) << s;
  return it - bytes.begin();
}

TEST(Gguf, WriterRoundTrip) {
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  auto f = GgufFile::FromBytes(bytes);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->GetString("general.architecture"), "llama");
  EXPECT_EQ(f->GetUint("u32"), 7u);
  EXPECT_EQ(f->GetInt("i32"), -3);
  EXPECT_EQ(f->GetFloat("f32"), 0.5);
  EXPECT_TRUE(f->GetBool("flag", false));
  EXPECT_EQ(f->GetUint("u64"), 1ull << 40);
  auto strings = f->GetStringArray("strings");
  ASSERT_EQ(strings.size(), 3u);
  EXPECT_EQ(strings[2], "ccc");
  EXPECT_EQ(f->GetFloatArray("floats"), (std::vector<float>{1.0f, -2.5f}));
  EXPECT_EQ(f->GetIntArray("ints"), (std::vector<int64_t>{1, -2, 3}));
  ASSERT_EQ(f->tensors().size(), 2u);
  const GgufTensor& t0 = f->GetTensor("t0");
  EXPECT_EQ(t0.shape_string(), "4x3");
  EXPECT_EQ(t0.n_bytes, 48u);
  EXPECT_EQ(reinterpret_cast<const float*>(t0.data)[11], 11.0f);
  const GgufTensor& t1 = f->GetTensor("t1");
  EXPECT_EQ(t1.type, GgmlType::kQ8_0);
  EXPECT_EQ(t1.offset % f->alignment(), 0u);
  EXPECT_EQ(t1.data[33], 1);
}

TEST(Gguf, ReadsVersion2) {
  // Version 2 has the same little-endian layout as version 3 (v3 only added big-endian files).
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  const uint32_t v2 = 2;
  std::memcpy(bytes.data() + 4, &v2, 4);
  auto f = GgufFile::FromBytes(bytes);
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->tensors().size(), 2u);
}

TEST(Gguf, TypedGettersRejectWrongTypes) {
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  auto f = GgufFile::FromBytes(bytes, "x.gguf");
  EXPECT_THROW(f->GetUint("i32"), Error);  // negative as unsigned
  EXPECT_THROW(f->GetString("u32"), Error);
  EXPECT_THROW(f->GetUint("missing"), Error);
  EXPECT_EQ(f->GetUint("missing", 5), 5u);
  EXPECT_THROW(f->GetIntArray("floats"), Error);
  EXPECT_THROW(f->GetTensor("nope"), Error);
  try {
    f->GetString("u32");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'u32'"), std::string::npos) << e.what();
  }
}

TEST(Gguf, WriteFileIsAtomicAndReadable) {
  const std::string path = testing::TempPath("w.gguf");
  SampleWriter().WriteFile(path);
  auto f = GgufFile::Open(path);
  EXPECT_EQ(f->tensors().size(), 2u);
  EXPECT_FALSE(testing::PartialFileLeft(path));
  std::remove(path.c_str());
}

// Issue 34: a file or link someone left at OUT.partial is neither followed nor deleted: the
// temporary has a unique name and is created exclusively.
TEST(Gguf, WriteFileNeverTouchesAnExistingPartialFile) {
  // Everything in a directory of its own, removed with what is in it when the binary exits: the
  // link and the user's file left at OUT.partial must not outlive the test (a later run whose
  // process got the same number would find them and fail to plant its own).
  const std::string dir = testing::TempPath("partial-planted");
  ASSERT_TRUE(std::filesystem::create_directory(dir)) << dir;
  const std::string path = dir + "/planted.gguf";
  const std::string victim = dir + "/victim.txt";
  std::ofstream(victim) << "precious";
  ASSERT_EQ(::symlink(victim.c_str(), (path + ".partial").c_str()), 0);
  SampleWriter().WriteFile(path);
  EXPECT_EQ(GgufFile::Open(path)->tensors().size(), 2u);
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "precious");  // the link's target was not overwritten
  struct stat st {};
  ASSERT_EQ(::lstat((path + ".partial").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));  // the link is still there, still a link
  EXPECT_FALSE(S_ISLNK([&] {
    struct stat out {};
    ::lstat(path.c_str(), &out);
    return out.st_mode;
  }()));
  // A user's own file of that name stays as it was.
  ::unlink((path + ".partial").c_str());
  std::ofstream(path + ".partial") << "mine";
  SampleWriter().WriteFile(path);
  std::ifstream mine(path + ".partial");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(mine)), std::istreambuf_iterator<char>()),
            "mine");
}

TEST(Gguf, FailedWriteLeavesNoFile) {
  const std::string path = testing::TempPath("fail.gguf");
  GgufWriter w;
  w.AddTensor("t", {32}, GgmlType::kF32, [](std::span<uint8_t>) { Fail("filler failed"); });
  EXPECT_THROW(w.WriteFile(path), Error);
  EXPECT_FALSE(testing::FileExists(path));
  EXPECT_FALSE(testing::PartialFileLeft(path));
}

TEST(Gguf, ReadsSharedStoriesModel) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  GROVE_SKIP_IF_MISSING(path);
  auto f = GgufFile::Open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->GetString("general.architecture"), "llama");
  EXPECT_EQ(f->GetUint("llama.block_count"), 5u);
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens").size(), 512u);
  EXPECT_EQ(f->GetTensor("token_embd.weight").shape_string(), "64x512");
}

TEST(Gguf, MissingFileNamesPath) {
  try {
    GgufFile::Open("/nonexistent/model.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
  }
}

TEST(GgufMalformed, EmptyAndTruncatedHeader) {
  ExpectParseError({}, "too short");
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  // Every prefix that cuts into the header or a tensor's data must fail cleanly. (Padding after the
  // last tensor is optional, so the cut must reach its last data byte.)
  auto good = GgufFile::FromBytes(bytes);
  const GgufTensor& last = good->GetTensor("t1");
  const std::size_t data_end = good->data_offset() + last.offset + last.n_bytes;
  for (std::size_t n : {4ul, 8ul, 12ul, 20ul, 30ul, 60ul, data_end - 40, data_end - 1}) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    EXPECT_THROW(GgufFile::FromBytes(cut, "bad.gguf"), Error) << "prefix " << n;
  }
  std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + 12);
  ExpectParseError(cut, "truncated while reading tensor count");
}

TEST(GgufMalformed, WrongMagic) {
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  bytes[0] = 'X';
  ExpectParseError(bytes, "bad magic");
}

TEST(GgufMalformed, UnsupportedVersion) {
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  Poke<uint32_t>(bytes, 4, 1);
  ExpectParseError(bytes, "version 1");
  Poke<uint32_t>(bytes, 4, 99);
  ExpectParseError(bytes, "unsupported GGUF version 99");
  Poke<uint32_t>(bytes, 4, 0x03000000);
  ExpectParseError(bytes, "big-endian");
}

TEST(GgufMalformed, AbsurdCounts) {
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  Poke<uint64_t>(bytes, 8, 1ull << 60);
  ExpectParseError(bytes, "tensor count");
  bytes = SampleWriter().WriteToBytes();
  Poke<uint64_t>(bytes, 16, 1ull << 62);
  ExpectParseError(bytes, "metadata count");
}

TEST(GgufMalformed, AbsurdStringLength) {
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  // The first key's length prefix sits right after the 24-byte header.
  Poke<uint64_t>(bytes, 24, 1ull << 50);
  ExpectParseError(bytes, "has length");
}

TEST(GgufMalformed, AbsurdArrayLength) {
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  // "floats" key, then u32 type (9), u32 element type, u64 count.
  std::size_t at = Find(bytes, "floats") + 6 + 4 + 4;
  Poke<uint64_t>(bytes, at, 1ull << 61);
  ExpectParseError(bytes, "'floats' array count");
}

TEST(GgufMalformed, InvalidValueType) {
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  std::size_t at = Find(bytes, "u32") + 3;
  Poke<uint32_t>(bytes, at, 77);
  ExpectParseError(bytes, "metadata 'u32' has invalid value type 77");
}

TEST(GgufMalformed, InvalidBool) {
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  std::size_t at = Find(bytes, "flag") + 4 + 4;
  bytes[at] = 7;
  ExpectParseError(bytes, "bool");
}

TEST(GgufMalformed, DuplicateKey) {
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  // Rename key "i32" to "u32".
  std::size_t at = Find(bytes, "i32");
  bytes[at] = 'u';
  ExpectParseError(bytes, "duplicate metadata key 'u32'");
}

TEST(GgufMalformed, TensorPastEndOfFile) {
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  std::size_t at = Find(bytes, "t1") + 2 + 4 + 8 + 4;  // name, n_dims, ne[0], type -> offset
  Poke<uint64_t>(bytes, at, 1ull << 40);
  ExpectParseError(bytes, "tensor 't1'");
  bytes = SampleWriter().WriteToBytes();
  auto good = GgufFile::FromBytes(bytes);
  bytes.resize(good->data_offset() + good->GetTensor("t1").offset + 20);  // t1's data cut short
  ExpectParseError(bytes, "extends past the end of the file");
}

TEST(GgufMalformed, MisalignedTensor) {
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  std::size_t at = Find(bytes, "t1") + 2 + 4 + 8 + 4;
  uint64_t offset;
  std::memcpy(&offset, bytes.data() + at, 8);
  Poke<uint64_t>(bytes, at, offset + 4);
  ExpectParseError(bytes, "not aligned");
}

TEST(GgufMalformed, BadShapeAndType) {
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  std::size_t at = Find(bytes, "t1") + 2;
  Poke<uint32_t>(bytes, at, 9);  // n_dims
  ExpectParseError(bytes, "tensor 't1' has 9 dimensions");
  bytes = SampleWriter().WriteToBytes();
  Poke<int64_t>(bytes, at + 4, -32);
  ExpectParseError(bytes, "dimension 0 of size -32");
  bytes = SampleWriter().WriteToBytes();
  Poke<int64_t>(bytes, at + 4, 31);  // not a whole Q8_0 block
  ExpectParseError(bytes, "not a multiple of its block size");
  bytes = SampleWriter().WriteToBytes();
  Poke<uint32_t>(bytes, at + 4 + 8, 1234);
  ExpectParseError(bytes, "tensor 't1' has unknown type 1234");
}

TEST(GgufMalformed, OverlappingTensors) {
  std::vector<uint8_t> bytes = SampleWriter().WriteToBytes();
  std::size_t at = Find(bytes, "t1") + 2 + 4 + 8 + 4;
  Poke<uint64_t>(bytes, at, 0);  // t1 now starts where t0 does
  ExpectParseError(bytes, "overlap");
}

TEST(GgufMalformed, BadAlignmentKey) {
  GgufWriter w = SampleWriter();
  w.SetUint32("general.alignment", 24);
  ExpectParseError(w.WriteToBytes(), "not a power of two");
}

// Flips every byte of a small file in turn: each variant either parses or throws grove::Error,
// never crashes (AddressSanitizer builds turn any overread into a failure).
TEST(GgufMalformed, EveryByteCorruptionFailsCleanly) {
  const std::vector<uint8_t> good = SampleWriter().WriteToBytes();
  int rejected = 0;
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{0x80}}) {
      std::vector<uint8_t> bytes = good;
      if (bytes[i] == v) continue;
      bytes[i] = v;
      try {
        GgufFile::FromBytes(bytes, "bad.gguf");
      } catch (const Error&) {
        ++rejected;
      }
    }
  }
  EXPECT_GT(rejected, 100);
}

}  // namespace
}  // namespace grove
