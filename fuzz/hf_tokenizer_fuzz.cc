// libFuzzer target for `grove convert-tokenizer`, which reads a user's Hugging Face files: the
// input is tokenizer.json, a NUL byte, then tokenizer_config.json (absent: empty). Whatever the
// files hold, the conversion either fails with grove::Error naming what it cannot convert, or
// writes GGUF keys that grove then loads as a tokenizer (or refuses with grove::Error) and encodes
// and decodes text with; nothing crashes, hangs or throws anything else. Seeds:
// tests/fuzz/corpus/hf_tokenizer/.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tokenize/hf_tokenizer.h"
#include "tokenize/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = in.find('\0');
  const std::string_view tokenizer_json = in.substr(0, nul);
  const std::string_view config_json =
      nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
  grove::GgufWriter writer;
  try {
    grove::ConvertHfTokenizer(tokenizer_json, config_json, {}, &writer);
  } catch (const grove::Error&) {
    return 0;
  }
  const std::vector<uint8_t> bytes = writer.WriteToBytes();
  try {
    const std::unique_ptr<grove::GgufFile> gguf = grove::GgufFile::FromBytes(bytes, "converted");
    const std::unique_ptr<grove::Tokenizer> tok = grove::Tokenizer::FromGguf(*gguf);
    const std::vector<int32_t> ids = tok->Encode("Hello, world! 12 <|end|> é\xff", true, true);
    tok->Decode(ids);
  } catch (const grove::Error&) {
  }
  return 0;
}
