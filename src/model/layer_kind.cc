#include "model/layer_kind.h"

#include <algorithm>
#include <cstddef>

#include "base/error.h"
#include "base/named.h"

namespace grove {

namespace {

constexpr Named<MixerKind> kMixerNames[] = {{MixerKind::kAttention, "attention"},
                                            {MixerKind::kGatedDeltaNet, "gated delta-net"}};
constexpr Named<FeedForwardKind> kFeedForwardNames[] = {
    {FeedForwardKind::kGated, "gated feed-forward"}, {FeedForwardKind::kExperts, "experts"}};

}  // namespace

std::string_view KindName(MixerKind kind) { return NameOf(kMixerNames, kind); }

std::string_view KindName(FeedForwardKind kind) { return NameOf(kFeedForwardNames, kind); }

void CheckLayerKinds(std::span<const LayerKind> layers, const BackendKinds& kinds,
                     std::string_view backend) {
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (std::find(kinds.mixers.begin(), kinds.mixers.end(), layers[l].mixer) ==
        kinds.mixers.end()) {
      Fail(backend, ": layer ", l, " is ", KindName(layers[l].mixer),
           ", which this backend has no op for");
    }
    if (std::find(kinds.feed_forwards.begin(), kinds.feed_forwards.end(), layers[l].feed_forward) ==
        kinds.feed_forwards.end()) {
      Fail(backend, ": layer ", l, "'s feed-forward is ", KindName(layers[l].feed_forward),
           ", which this backend has no op for");
    }
  }
}

}  // namespace grove
