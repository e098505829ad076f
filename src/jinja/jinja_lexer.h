// Splits a template into text and the tokens of its tags, applying whitespace control the way
// Jinja2 does with trim_blocks and lstrip_blocks on (Hugging Face's settings):
//   `{%- ... -%}`, `{{- ... -}}`, `{#- ... -#}`  strip all whitespace on that side;
//   trim_blocks   the first newline after a block or comment tag goes;
//   lstrip_blocks spaces and tabs before a block or comment tag at the start of a line go
//                 (`{%+` keeps them); a single trailing newline of the template goes.
// Comments vanish; `{% raw %}...{% endraw %}` becomes text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace grove::jinja {

struct Token {
  enum class Kind {
    kText,
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,
    kString,  // value unescaped
    kInt,
    kFloat,
    kOp,  // operators and punctuation, in text
    kEnd,
  };
  Kind kind;
  std::string text;
  int line;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Throws grove::Error "chat template line N: ..." for an unterminated tag, comment or string.
std::vector<Token> Lex(std::string_view source, const LexOptions& options);

}  // namespace grove::jinja
