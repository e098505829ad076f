// Jinja2's filters and tests and the Python methods templates call on strings, dicts and lists:
// the subset real chat templates use. Each throws ValueError ("unsupported filter 'wordwrap'")
// for what it does not know, and the renderer adds the line.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/html_escape.h"
#include "jinja/jinja_value.h"

namespace grove::jinja {

// `target | name(args)`. `max_bytes` bounds what a filter may build (indent, repetition).
Value ApplyFilter(std::string_view name, const Value& target, const CallArgs& args,
                  size_t max_bytes);
// `target is name(args)`.
bool ApplyTest(std::string_view name, const Value& target, const CallArgs& args);
// `target.name(args)`: str, dict and list methods.
Value CallMethod(const Value& target, std::string_view name, const CallArgs& args);

// One filter's call: `target | name(args)`, with the bound on what it may build. Filters that share
// a function (first and last, select and reject) read which one from `name`.
struct FilterCall {
  std::string_view name;
  const Value& target;
  const CallArgs& args;
  size_t max_bytes;
};
using Filter = Value (*)(const FilterCall&);

// The filters over sequences (jinja_sequence_filters.cc): list, first, sort, map, select...
std::optional<Filter> FindSequenceFilter(std::string_view name);

// The argument at `index` or named `name`, or `fallback`; ArgBool reads it as Python's truth.
inline Value Arg(const CallArgs& args, size_t index, std::string_view name, const Value& fallback) {
  const Value* v = args.Get(index, name);
  return v != nullptr ? *v : fallback;
}
inline bool ArgBool(const CallArgs& args, size_t index, std::string_view name, bool fallback) {
  const Value* v = args.Get(index, name);
  return v != nullptr ? Truthy(*v) : fallback;
}

// Python's str methods on UTF-8 text, shared by the methods and the filters.
std::string PyStrip(std::string_view s, const Value* chars, bool left, bool right);
std::string PyLower(std::string_view s);
std::string PyUpper(std::string_view s);
std::string PyCapitalize(std::string_view s);
std::string PyTitle(std::string_view s);
std::string PyReplace(std::string_view s, std::string_view old, std::string_view with,
                      int64_t count);

}  // namespace grove::jinja
