// Python's operators on template values (jinja_operators.cc). Each throws ValueError for operands
// Python would refuse; the renderer adds the line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "jinja/jinja_value.h"

namespace grove::jinja {

// An int or a bool (Python's bool is an int): what indices, ranges and repetition take.
bool IsIntLike(const Value& v);

// `obj.name`: a dict's member, or undefined; reading from undefined fails.
Value GetAttr(const Value& obj, const std::string& name);
// `obj[key]`: dict keys, list and string indices (by code point, negative from the end).
Value GetItem(const Value& obj, const Value& key);
// `obj[start:stop:step]` of a list or string; each bound may be None.
Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// `a op b` for + - * / // % ** ~ == != < > <= >= in "not in"; `max_bytes` bounds what + and *
// may build.
Value BinaryOperation(std::string_view op, const Value& a, const Value& b, size_t max_bytes);
// `op v` for "-", "+" and "not".
Value UnaryOperation(std::string_view op, const Value& v);

}  // namespace grove::jinja
