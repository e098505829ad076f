#include "jinja/chat_template.h"

#include <chrono>

#include "base/bounded_json.h"
#include "base/error.h"
#include "jinja/jinja_json.h"

namespace grove::jinja {

namespace {

// Every string valid UTF-8, and no nesting deeper than a bounded parse accepts
// (base/bounded_json.h): this walk, the conversion to template values and the template's own walks
// recurse. `depth` counts the arrays and objects `j` is inside of.
void CheckUtf8AndDepth(const nlohmann::ordered_json& j, const std::string& where, int depth) {
  if ((j.is_array() || j.is_object()) && depth >= kMaxJsonDepth) {
    Fail(where, ": nesting deeper than ", kMaxJsonDepth, " levels");
  }
  if (j.is_string()) {
    if (!IsValidUtf8(j.get_ref<const std::string&>())) Fail(where, ": invalid UTF-8");
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      CheckUtf8AndDepth(j[i], StrCat(where, "[", i, "]"), depth + 1);
    }
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (!IsValidUtf8(k)) Fail(where, ": a key is invalid UTF-8");
      CheckUtf8AndDepth(v, StrCat(where, ".", k), depth + 1);
    }
  }
}

std::string Strftime(const std::string& format, const std::tm& now) {
  if (format.empty()) return "";
  std::string buffer(format.size() * 8 + 64, '\0');
  size_t n = std::strftime(buffer.data(), buffer.size(), format.c_str(), &now);
  if (n == 0) ValueFail("strftime_now: format '", format, "' gives an empty or too long text");
  buffer.resize(n);
  return buffer;
}

}  // namespace

void CheckChatInput(const ChatTemplateInput& input) {
  const nlohmann::ordered_json& messages = input.messages;
  if (!messages.is_array()) Fail("messages: must be an array");
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::ordered_json& m = messages[i];
    std::string where = StrCat("messages[", i, "]");
    if (!m.is_object()) Fail(where, ": must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) Fail(where, ".role: must be a string");
    const std::string& r = role->get_ref<const std::string&>();
    if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool" &&
        r != "ipython" && r != "function") {
      Fail(where, ".role: unknown role '", IsValidUtf8(r) ? r : "(invalid UTF-8)",
           "' (expected system, developer, user, assistant, tool, ipython or function)");
    }
    CheckUtf8AndDepth(m, where, 1);
  }
  CheckUtf8AndDepth(input.tools, "tools", 0);
  CheckUtf8AndDepth(input.extra, "template arguments", 0);
  if (!IsValidUtf8(input.bos_token)) Fail("bos_token: invalid UTF-8");
  if (!IsValidUtf8(input.eos_token)) Fail("eos_token: invalid UTF-8");
}

ChatTemplate::ChatTemplate(std::string_view source) : template_(source, LexOptions{}) {}

std::string ChatTemplate::Apply(const ChatTemplateInput& input, const RenderLimits& limits) const {
  CheckChatInput(input);
  ValueDict globals;
  globals.Set("messages", FromJson(input.messages));
  globals.Set("tools", input.tools.is_null() ? Value::None() : FromJson(input.tools));
  globals.Set("documents", Value::None());
  globals.Set("add_generation_prompt", Value::Bool(input.add_generation_prompt));
  globals.Set("bos_token", Value::String(input.bos_token));
  globals.Set("eos_token", Value::String(input.eos_token));
  globals.Set("raise_exception", Value::Func([](CallArgs& args) -> Value {
                std::string message = args.positional.empty() ? "" : ToStr(args.positional[0]);
                throw ValueError(message, /*raised=*/true);
              }));
  std::tm now{};
  if (input.now) {
    now = *input.now;
  } else {
    std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    localtime_r(&t, &now);
  }
  globals.Set("strftime_now", Value::Func([now](CallArgs& args) {
                if (args.positional.empty() || !args.positional[0].is_string()) {
                  ValueFail("strftime_now() needs a format string");
                }
                return Value::String(Strftime(args.positional[0].text, now));
              }));
  if (input.extra.is_object()) {
    for (const auto& [k, v] : input.extra.items()) globals.Set(k, FromJson(v));
  }
  return template_.Render(globals, limits);
}

}  // namespace grove::jinja
