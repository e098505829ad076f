// grove template -m FILE.gguf --messages CONV.json: the exact prompt text the model sees for a
// conversation, rendered with the file's own chat template (`tokenizer.chat_template`) the way
// Hugging Face's apply_chat_template does; files without one fall back to grove's hand-written
// renderers (chat/chat_template.h), which stderr says.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "base/bounded_json.h"
#include "base/error.h"
#include "base/text_file.h"
#include "chat/model_chat_format.h"
#include "commands.h"
#include "engine_options.h"
#include "io/gguf.h"
#include "jinja/chat_template.h"
#include "tokenize/tokenizer.h"

namespace grove::cli {
namespace {

using OrderedJson = nlohmann::ordered_json;

struct TemplateOptions {
  std::string model;
  std::string messages;
  std::string system;
  bool no_generation_prompt = false;
};

// CONV.json is a list of messages, or an object with "messages" and optionally "tools" and more
// template variables (e.g. "enable_thinking": false).
jinja::ChatTemplateInput ReadConversation(const std::string& path) {
  // A FIFO or a device is refused rather than read forever, and a document nested deeper than
  // real conversations are is refused while it is parsed (base/bounded_json.h).
  const OrderedJson doc = ReadJsonFile<OrderedJson>(path, "--messages");
  jinja::ChatTemplateInput input;
  if (doc.is_array()) {
    input.messages = doc;
  } else if (doc.is_object() && doc.contains("messages")) {
    input.messages = doc["messages"];
    for (const auto& [k, v] : doc.items()) {
      if (k == "tools") {
        input.tools = v;
      } else if (k != "messages") {
        input.extra[k] = v;
      }
    }
  } else {
    Fail("'", path, "': expected a list of messages or an object with \"messages\"");
  }
  return input;
}

void RunTemplate(const TemplateOptions& o) {
  auto gguf = GgufFile::Open(o.model);
  jinja::ChatTemplateInput input = ReadConversation(o.messages);
  if (!o.system.empty()) {
    OrderedJson system = {{"role", "system"}, {"content", o.system}};
    if (!input.messages.empty() && input.messages[0].value("role", "") == "system") {
      input.messages[0] = system;
    } else {
      input.messages.insert(input.messages.begin(), system);
    }
  }
  input.add_generation_prompt = !o.no_generation_prompt;
  if (!gguf->Has("tokenizer.ggml.model")) {
    Fail("'", o.model,
         "' has no vocabulary (tokenizer.ggml.model): the template's bos_token and "
         "eos_token are its tokens' texts");
  }
  const auto tok = Tokenizer::FromGguf(*gguf);
  const chat::ModelChatFormat format(gguf->GetString("tokenizer.chat_template", ""), *tok);
  // This command shows the model's own rendering: a template grove cannot run is an error here
  // (the server and grove chat fall back to the family renderer instead).
  if (!format.template_error().empty()) Fail(format.template_error());
  if (!format.uses_model_template()) {
    std::fprintf(stderr,
                 "grove template: '%s' has no tokenizer.chat_template; using grove's %s format "
                 "(chat/chat_template.h)\n",
                 o.model.c_str(), format.Describe().c_str());
  }
  const std::string prompt = format.Render(std::move(input));
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
}

}  // namespace

void AddTemplateCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "template", "Print the prompt text a conversation becomes under the model's chat template");
  auto o = std::make_shared<TemplateOptions>();
  AddModelOption(*cmd, o->model, ModelRole::kVocabulary);
  cmd->add_option("--messages", o->messages,
                  "JSON file: a list of messages, or {\"messages\": [...], \"tools\": [...], ...}")
      ->required();
  cmd->add_option("--system", o->system, "System prompt (replaces or adds the first message)");
  cmd->add_flag("--no-generation-prompt", o->no_generation_prompt,
                "Do not open the assistant's turn at the end (add_generation_prompt=false)");
  cmd->callback([o] { RunTemplate(*o); });
}

}  // namespace grove::cli
