#include "chat/model_chat_format.h"

#include "base/error.h"
#include "tokenize/tokenizer.h"

namespace grove::chat {

namespace {

// The variables a template gets from the conversation itself (jinja/chat_template.h): a template
// argument of one of these names would render another conversation than the one checked.
constexpr const char* kRenderVariables[] = {
    "messages",  "tools",     "documents",       "add_generation_prompt",
    "bos_token", "eos_token", "raise_exception", "strftime_now"};

void RefuseRenderVariables(const nlohmann::ordered_json& extra) {
  if (!extra.is_object()) return;
  for (const char* name : kRenderVariables) {
    if (extra.contains(name)) {
      throw ChatMessagesError(
          StrCat("chat_template_kwargs.", name,
                 " would replace what the request itself sets (messages, tools, "
                 "add_generation_prompt, bos_token, eos_token...); send it as the request's own "
                 "field, or leave it out"),
          "chat_template_kwargs");
    }
  }
}

// OpenAI's newer models take "developer" for the system role. A template that names the role
// gets it as it came; any other (and the family renderers) gets it as system, which OpenAI
// describes it as. llama-server and vLLM hand it to every template as it came, where one that
// knows only system drops it without a word or raises.
void DeveloperAsSystem(nlohmann::ordered_json& messages) {
  if (!messages.is_array()) return;
  for (nlohmann::ordered_json& m : messages) {
    auto role = m.is_object() ? m.find("role") : m.end();
    if (role != m.end() && *role == "developer") *role = "system";
  }
}

}  // namespace

ModelChatFormat::ModelChatFormat(std::string_view jinja_source, const Tokenizer& tokenizer)
    : tokenizer_(tokenizer),
      family_(DetectChatTemplate(jinja_source)),
      template_names_developer_(jinja_source.find("developer") != std::string_view::npos) {
  if (jinja_source.empty()) return;
  try {
    model_template_ = std::make_unique<const jinja::ChatTemplate>(jinja_source);
  } catch (const Error& e) {
    template_error_ = e.what();
  }
}

ModelChatFormat::~ModelChatFormat() = default;

std::string ModelChatFormat::Describe() const {
  if (model_template_) return "the model's template";
  return std::string(ChatTemplateName(family_));
}

std::string ModelChatFormat::Render(jinja::ChatTemplateInput input) const {
  const Tokenizer& tok = tokenizer_;
  RefuseRenderVariables(input.extra);
  if (!model_template_ || !template_names_developer_) DeveloperAsSystem(input.messages);
  if (model_template_) {
    input.bos_token = tok.bos() >= 0 ? tok.TokenText(tok.bos()) : "";
    input.eos_token = tok.eos() >= 0 ? tok.TokenText(tok.eos()) : "";
    return model_template_->Apply(input);
  }
  jinja::CheckChatInput(input);
  std::vector<ChatMessage> messages;
  for (const nlohmann::ordered_json& m : input.messages) {
    const nlohmann::ordered_json content = m.value("content", nlohmann::ordered_json());
    messages.push_back(
        {m["role"].get<std::string>(), content.is_string() ? content.get<std::string>() : ""});
  }
  // The family renderers always end where the reply begins.
  const std::string bos =
      family_ != ChatTemplate::kPlain && tok.bos() >= 0 ? tok.TokenText(tok.bos()) : "";
  return RenderChat(family_, messages, bos);
}

std::vector<int32_t> ModelChatFormat::Encode(std::string_view text) const {
  const Tokenizer& tok = tokenizer_;
  if (!model_template_ && family_ == ChatTemplate::kPlain) {
    return tok.Encode(text, tok.add_bos_by_default());  // plain text: no markers to parse
  }
  const std::string bos = tok.bos() >= 0 ? tok.TokenText(tok.bos()) : "";
  const bool add_bos = tok.add_bos_by_default() && (bos.empty() || text.rfind(bos, 0) != 0);
  return tok.Encode(text, add_bos, /*parse_special=*/true);
}

std::vector<std::string> ModelChatFormat::StopStrings() const {
  // A recognised family's markers stay stops under the model's template too; the plain format's
  // "\nUser:" only where the plain format renders.
  if (model_template_ && family_ == ChatTemplate::kPlain) return {};
  return ChatStopStrings(family_);
}

}  // namespace grove::chat
