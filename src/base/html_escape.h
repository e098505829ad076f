// Text as HTML/XML character data or attribute values: & < > " ' as entities, the way Python's
// markupsafe escapes (Jinja's `escape` filter and autoescaping; also the SVG and HTML grove
// writes).
#pragma once

#include <string>
#include <string_view>

namespace grove {

std::string HtmlEscape(std::string_view s);

}  // namespace grove
