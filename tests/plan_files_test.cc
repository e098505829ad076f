// The plan files: what grove writes (tree, calibrate, bench --profile-out) reads back as written,
// a refused write leaves the old file whole, and malformed files are refused with their name.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "base/error.h"
#include "base/text_file.h"
#include "speculate/plan_files.h"
#include "test_support.h"

namespace grove {
namespace {

using testing::TempPath;

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

void ExpectRefused(const std::function<void()>& read, const std::string& needle) {
  try {
    read();
    ADD_FAILURE() << "accepted; expected an error naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(PlanFiles, TreeRoundTripsAndBadFilesAreRefused) {
  const std::string path = TempPath("plan-tree.json");
  TokenTree shape;
  const int32_t a = shape.AddChild(-1, kNoToken, 0.5f);
  shape.AddChild(-1, kNoToken, 0.3f);
  shape.AddChild(a, kNoToken, 0.4f);
  WriteTreeFile(path, shape);
  const TokenTree read = ReadTreeFile(path);
  ASSERT_EQ(read.size(), 3);
  for (int32_t i = 0; i < read.size(); ++i) EXPECT_EQ(read.node(i).parent, shape.node(i).parent);
  WriteText(path, R"({"parents": [-1, 1]})");  // a node cannot hang under itself or later nodes
  ExpectRefused([&] { ReadTreeFile(path); }, "parents[1]");
  WriteText(path, R"({"parents": []})");
  ExpectRefused([&] { ReadTreeFile(path); }, "no nodes");
  WriteText(path, "{\"parents\": [-1,");
  ExpectRefused([&] { ReadTreeFile(path); }, "not valid JSON");
  // Nested far deeper than any plan file: refused while parsing, before a recursive walk could
  // overflow the stack (base/bounded_json.h).
  WriteText(path, "{\"parents\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  ExpectRefused([&] { ReadTreeFile(path); }, "nesting deeper than 128 levels");
  // More nodes than the caller allows: refused before a tree is built.
  WriteTreeFile(path, shape);
  ExpectRefused([&] { ReadTreeFile(path, 2); }, "has 3 nodes, more than the 2 allowed");
  EXPECT_EQ(ReadTreeFile(path, 3).size(), 3);
  std::remove(path.c_str());
}

TEST(PlanFiles, AcceptanceRoundTripsWithItsProvenance) {
  const std::string path = TempPath("plan-accept.json");
  WriteAcceptanceFile(path, {.acceptance = {0.7, 0.1, 0.05}, .draft_seconds_per_level = 2e-4},
                      {.none = 0.15,
                       .width = 3,
                       .sampling = {.temperature = 0.0f},
                       .steps = 40,
                       .prompts = 2,
                       .target = "t.gguf",
                       .draft = "d.gguf",
                       .method = "test"});
  const AcceptanceFile read = ReadAcceptanceFile(path);
  EXPECT_EQ(read.acceptance, (std::vector<double>{0.7, 0.1, 0.05}));
  EXPECT_DOUBLE_EQ(read.draft_seconds_per_level, 2e-4);
  const std::string text = ReadTextFile(path, "test");
  for (const char* field : {"\"none\"", "\"width\"", "\"steps\"", "\"target\"", "\"method\""}) {
    EXPECT_NE(text.find(field), std::string::npos) << field;
  }
  WriteText(path, R"({"acceptance": [0.7, "x"]})");
  ExpectRefused([&] { ReadAcceptanceFile(path); }, "every entry must be a number");
  WriteText(path, R"({"acceptance": [0.7], "draft_seconds_per_level": -1})");
  ExpectRefused([&] { ReadAcceptanceFile(path); }, "draft_seconds_per_level");
  std::remove(path.c_str());
}

TEST(PlanFiles, ProfileRoundTripsAndARefusedWriteKeepsTheOldFile) {
  const std::string path = TempPath("plan-profile.json");
  VerifyProfile profile{.model = "m",
                        .weight_bytes = 1000000,
                        .threads = 2,
                        .curve = {{.n = 1, .seconds_median = 1e-3},
                                  {.n = 4, .seconds_median = 1.5e-3},
                                  {.n = 16, .seconds_median = 4e-3}},
                        .bandwidth_gbps = 20.0};
  WriteVerifyProfile(path, profile);
  const VerifyCostCurve curve = ReadVerifyProfile(path);
  EXPECT_DOUBLE_EQ(curve.Seconds(1), 1e-3);
  EXPECT_DOUBLE_EQ(curve.Seconds(4), 1.5e-3);
  EXPECT_DOUBLE_EQ(curve.Seconds(16), 4e-3);
  const std::string text = ReadTextFile(path, "test");
  EXPECT_NE(text.find("\"decode_gbps\": 1.0"), std::string::npos) << text;  // 1 MB in 1 ms
  // A profile refused (its curve does not start at 1) leaves the old one whole.
  profile.curve.erase(profile.curve.begin());
  EXPECT_THROW(WriteVerifyProfile(path, profile), Error);
  EXPECT_EQ(ReadTextFile(path, "test"), text);
  WriteText(path, R"({"curve": [{"n": 1}]})");
  ExpectRefused([&] { ReadVerifyProfile(path); }, "seconds_median");
  // An n no forward holds, or past int32 (2^32 + 2 once read as 2), is refused by name.
  for (const char* n : {"9000", "4294967298", "2147483648"}) {
    WriteText(path, std::string(R"({"curve": [{"n": 1, "seconds_median": 1e-3}, {"n": )") + n +
                        R"(, "seconds_median": 2e-3}]})");
    ExpectRefused([&] { ReadVerifyProfile(path); }, std::string("n = ") + n);
  }
  std::remove(path.c_str());
  // Nothing left beside it.
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
    EXPECT_EQ(entry.path().string().find("plan-profile.json."), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace grove
