// libFuzzer target for the OpenAI-compatible request parser, what a client sends to `grove serve`:
// any bytes that are JSON must parse into a request or be refused with ApiError (the server's 400),
// never crash or throw anything else. The first byte picks the endpoint (completions or chat), the
// rest is the body, parsed as the server parses it (depth bounded, base/bounded_json.h). Seeds:
// tests/fuzz/corpus/api_request/.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/bounded_json.h"
#include "base/error.h"
#include "serve/api_error.h"
#include "serve/api_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) != 0;
  nlohmann::json body;
  try {
    body = grove::ParseBoundedJson(
        std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), "the body");
  } catch (const grove::Error&) {
    return 0;  // the server's 400 before the parser sees it
  }
  try {
    grove::serve::ParseCompletionRequest(body, chat, grove::serve::ApiLimits{});
  } catch (const grove::serve::ApiError&) {
  }
  return 0;
}
