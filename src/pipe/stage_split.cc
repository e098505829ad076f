#include "pipe/stage_split.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "base/error.h"

namespace grove {

std::vector<LayerRange> SplitLayers(int32_t n_layer, int32_t n_stages) {
  if (n_stages < 1 || n_stages > n_layer) {
    Fail("pipeline: ", n_stages, " stages for a model of ", n_layer,
         " layers (at least 1 stage, at most one per layer)");
  }
  std::vector<LayerRange> ranges;
  int32_t first = 0;
  for (int32_t s = 0; s < n_stages; ++s) {
    const int32_t size = n_layer / n_stages + (s < n_layer % n_stages ? 1 : 0);
    ranges.push_back({first, first + size});
    first += size;
  }
  return ranges;
}

std::vector<LayerRange> SpreadLayers(int32_t n_layer, int32_t n_stages) {
  if (n_stages <= n_layer) return SplitLayers(n_layer, n_stages);
  if (n_layer < 2)
    Fail("pipeline: ", n_stages, " virtual stages need a model of 2 layers at least");
  // Layer i goes to stage round(i (n_stages - 1) / (n_layer - 1)): 0 and n_stages - 1 included.
  std::vector<LayerRange> ranges;
  int32_t layer = 0;
  for (int32_t s = 0; s < n_stages; ++s) {
    const int32_t first = layer;
    while (layer < n_layer && (2 * static_cast<int64_t>(layer) * (n_stages - 1) + (n_layer - 1)) /
                                      (2 * static_cast<int64_t>(n_layer - 1)) ==
                                  s) {
      ++layer;
    }
    ranges.push_back({first, layer});
  }
  return ranges;
}

std::vector<LayerRange> ParseLayerSplit(std::string_view text, int32_t n_layer) {
  std::vector<LayerRange> ranges;
  int32_t first = 0;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    const std::string_view item = text.substr(begin, comma - begin);
    int32_t size = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), size);
    if (error != std::errc() || end != item.data() + item.size() || size < 1) {
      Fail("pipeline split '", std::string(text), "': '", std::string(item),
           "' is not a layer count >= 1");
    }
    ranges.push_back({first, first + size});
    first += size;
    begin = comma + 1;
  }
  if (first != n_layer) {
    Fail("pipeline split '", std::string(text), "' covers ", first, " layers; the model has ",
         n_layer);
  }
  return ranges;
}

}  // namespace grove
