// How one model's conversations become prompt text and tokens: the model's own chat template (the
// GGUF's `tokenizer.chat_template`, run by jinja/ as Hugging Face's apply_chat_template does),
// or, for a file without one (or with one grove cannot run), the hand-written renderer of its
// family (chat_template.h). `grove template`, `grove chat` and the server all go through this, so
// a conversation reads the same everywhere.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "jinja/chat_template.h"

namespace grove {
class Tokenizer;
}

namespace grove::chat {

class ModelChatFormat {
 public:
  // `jinja_source` is the file's tokenizer.chat_template ("" when absent). A template that does not
  // parse is not an error here: the family renderer takes over and template_error() says why.
  ModelChatFormat(std::string_view jinja_source, const Tokenizer& tokenizer);
  ~ModelChatFormat();

  bool uses_model_template() const { return model_template_ != nullptr; }
  // Why the file's template is not used; empty when it is, or when the file has none.
  const std::string& template_error() const { return template_error_; }
  // "the model's template", or the family renderer's name ("llama-3", "chatml", "plain", ...).
  std::string Describe() const;

  // The prompt text. Fills in bos_token / eos_token from the vocabulary (the tokens' own texts);
  // a "developer" message is a system one unless the template names that role. Throws
  // grove::Error for input the template refuses (its raise_exception message, jinja's
  // TemplateRaised), an unknown role or invalid UTF-8 (jinja::CheckChatInput), and
  // ChatMessagesError for a template argument (input.extra) that would replace one of the
  // variables the conversation sets (messages, tools, add_generation_prompt, ...).
  std::string Render(jinja::ChatTemplateInput input) const;

  // The tokens of rendered text: special-token text (the template's markers) becomes the special
  // tokens, and BOS is added only where the model wants one and the text does not already start
  // with it, as llama-server does.
  std::vector<int32_t> Encode(std::string_view text) const;

  // Texts that end the assistant's turn besides the model's end-of-generation tokens: a
  // recognised family's markers; none for a model template of no known family (its turn ends at
  // its EOS/EOT tokens).
  std::vector<std::string> StopStrings() const;

 private:
  const Tokenizer& tokenizer_;
  std::unique_ptr<const jinja::ChatTemplate> model_template_;
  std::string template_error_;
  ChatTemplate family_;
  bool template_names_developer_;  // the model's template has a "developer" role of its own
};

}  // namespace grove::chat
