// A target split by layers into pipeline stages (PipeDec §3.1): contiguous layer ranges, the first
// holding the embedding and the last the final norm and output head.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace grove {

struct LayerRange {
  int32_t first = 0;  // first layer of the stage
  int32_t last = 0;   // one past its last layer

  int32_t size() const { return last - first; }
  bool operator==(const LayerRange&) const = default;
};

// n_stages ranges as even as possible; the first n_layer % n_stages stages get one layer more.
// Throws grove::Error when n_stages is not in [1, n_layer].
std::vector<LayerRange> SplitLayers(int32_t n_layer, int32_t n_stages);

// The simulator's virtual stages (pipeline_clock.h): n_stages >= 2 stages over n_layer >= 2 layers
// where there may be more stages than layers. Each layer goes to one stage, spread evenly, the
// first and the last stage holding one at least; the stages between without one pass rows on.
std::vector<LayerRange> SpreadLayers(int32_t n_layer, int32_t n_stages);

// An explicit split, the layers of each stage in order: "3,3,2". Throws grove::Error unless every
// count is >= 1 and they add up to n_layer.
std::vector<LayerRange> ParseLayerSplit(std::string_view text, int32_t n_layer);

}  // namespace grove
