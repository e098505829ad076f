// libFuzzer target for chat templates: any template text must render or be refused with
// grove::Error (a syntax error, an unsupported construct, a limit), never crash, hang or throw
// anything else. Each input is parsed and rendered over a small conversation with tools, under
// tight limits so that a slow input fails fast. Seeds: tests/fuzz/corpus/jinja/.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "jinja/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json kMessages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "hi é"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
      "function": {"name": "f", "arguments": {"x": 1.5, "y": [true, null]}}}]},
    {"role": "tool", "content": "42"}])");
  static const nlohmann::ordered_json kTools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
  const std::string source(reinterpret_cast<const char*>(data), size);
  try {
    grove::jinja::ChatTemplate tpl(source);
    grove::jinja::ChatTemplateInput input;
    input.messages = kMessages;
    input.tools = kTools;
    input.bos_token = "<s>";
    input.eos_token = "</s>";
    input.now = std::tm{};
    grove::jinja::RenderLimits limits;
    limits.max_steps = 20000;
    limits.max_call_depth = 16;
    limits.max_output_bytes = 1 << 16;
    tpl.Apply(input, limits);
  } catch (const grove::Error&) {
  }
  return 0;
}
