// libFuzzer target for the OpenAI-compatible request parser, what a client sends to `grove serve`:
// any bytes that are JSON must parse into a request or be refused with ApiError (the server's 400),
// never crash or throw anything else. The first byte picks the endpoint (completions or chat), the
// rest is the body. Seeds: tests/fuzz/corpus/api_request/.
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "serve/api_error.h"
#include "serve/api_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) != 0;
  const nlohmann::json body =
      nlohmann::json::parse(data + 1, data + size, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return 0;
  try {
    grove::serve::ParseCompletionRequest(body, chat, grove::serve::ApiLimits{});
  } catch (const grove::serve::ApiError&) {
  }
  return 0;
}
