// Template values from and to JSON (jinja_json.cc): the messages and tools a chat request carries
// come in as JSON, and the tojson filter writes JSON as Python's json.dumps does.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "jinja/jinja_value.h"

namespace grove::jinja {

// JSON objects keep their keys in the order written, as Python's dicts do. A value nested deeper
// than a bounded parse accepts (kMaxJsonDepth, base/bounded_json.h) fails (grove::Error): the
// conversion recurses.
Value FromJson(const nlohmann::ordered_json& j);
// json.dumps(v, ensure_ascii=False, indent=indent, separators=..., sort_keys=False) as Hugging
// Face's tojson filter calls it; indent < 0 is Python's indent=None. Fails on values JSON cannot
// hold (undefined, functions).
std::string DumpJson(const Value& v, int indent, std::string_view item_sep,
                     std::string_view key_sep);

}  // namespace grove::jinja
