// A parsed template and its interpreter.
//
// Templates come from model files, so rendering is bounded (jinja_budget.h: steps, bytes made,
// time, stack, macro depth and output). Every failure is a grove::Error naming the template line
// ("chat template line 12: unsupported filter 'wordwrap'"); the template's own
// raise_exception(msg) is a TemplateRaised carrying msg.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/error.h"
#include "jinja/jinja_ast.h"
#include "jinja/jinja_budget.h"
#include "jinja/jinja_lexer.h"
#include "jinja/jinja_value.h"

namespace grove::jinja {

// The template called raise_exception: the message is the template's own (with its line).
class TemplateRaised : public Error {
 public:
  using Error::Error;
};

class Template {
 public:
  // Parses `source`; throws grove::Error for a syntax error or an unsupported tag.
  explicit Template(std::string_view source, const LexOptions& options = {});

  // Renders with `globals` as the template's variables (range, namespace and dict are built in).
  std::string Render(const ValueDict& globals, const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace grove::jinja
