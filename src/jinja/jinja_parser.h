// Parses Jinja2 template source into statements (jinja_ast.h). What the parser does not know is an
// error naming it and its line, e.g. "chat template line 3: unsupported tag 'include'".
#pragma once

#include <string_view>

#include "jinja/jinja_ast.h"
#include "jinja/jinja_lexer.h"

namespace grove::jinja {

// Nesting deeper than this (brackets, operators, blocks) is refused: a parser that recursed on
// untrusted input without a bound could run out of stack.
inline constexpr int kMaxParseDepth = 256;

Body Parse(std::string_view source, const LexOptions& options);

}  // namespace grove::jinja
