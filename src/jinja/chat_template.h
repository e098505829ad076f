// A model's own chat template (the GGUF's `tokenizer.chat_template`), rendered the way Hugging
// Face's apply_chat_template does: Jinja2 in an immutable sandbox with trim_blocks and
// lstrip_blocks, keep_trailing_newline off, and the globals
//   messages, tools (None when absent), documents (None), add_generation_prompt,
//   bos_token, eos_token, raise_exception(msg), strftime_now(fmt)
// plus any extra keyword arguments (e.g. enable_thinking for Qwen3).
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "jinja/jinja_render.h"

namespace grove::jinja {

// JSON objects keep their keys in the order written (ordered_json), as Python's dicts do: a tool's
// parameters print in the order the client sent them.
struct ChatTemplateInput {
  nlohmann::ordered_json messages =
      nlohmann::ordered_json::array();  // [{"role": ..., "content": ...}, ...]
  nlohmann::ordered_json tools;         // null, or an array of tool definitions
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  nlohmann::ordered_json extra =
      nlohmann::ordered_json::object();  // more template variables (enable_thinking)
  // strftime_now's time (local, broken down); the current local time when absent. Tests fix it.
  std::optional<std::tm> now;
};

// Checks what the caller sends before a template sees it: `messages` is a non-empty array of
// objects with a known role (system, developer, user, assistant, tool, ipython, function), every
// string in messages, tools and extra is valid UTF-8, and none of them nests arrays and objects
// deeper than a bounded parse accepts (kMaxJsonDepth, base/bounded_json.h). Throws grove::Error
// naming the field, e.g. "messages[2].role: unknown role 'robot'".
void CheckChatInput(const ChatTemplateInput& input);

class ChatTemplate {
 public:
  // Parses the template; throws grove::Error ("chat template line 3: ...") if it cannot be run.
  explicit ChatTemplate(std::string_view source);

  // The prompt text. Checks the input first (CheckChatInput); a template that raises gives
  // TemplateRaised with its own message, anything else wrong a grove::Error naming the line.
  std::string Apply(const ChatTemplateInput& input, const RenderLimits& limits = {}) const;

 private:
  Template template_;
};

}  // namespace grove::jinja
