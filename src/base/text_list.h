// The items of a separated list ("2,3,4" -> "2", "3", "4"): the one way grove reads a list of
// values from a flag, an environment variable or a spec. An empty text is an empty list; an empty
// item stays an item ("2,,4", "2,4,"), for the caller to refuse by name.
#pragma once

#include <string_view>
#include <vector>

namespace grove {

inline std::vector<std::string_view> SplitList(std::string_view text, char separator = ',') {
  std::vector<std::string_view> items;
  if (text.empty()) return items;
  for (std::size_t begin = 0;;) {
    const std::size_t end = text.find(separator, begin);
    items.push_back(text.substr(begin, end == std::string_view::npos ? end : end - begin));
    if (end == std::string_view::npos) return items;
    begin = end + 1;
  }
}

}  // namespace grove
