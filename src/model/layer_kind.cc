#include "model/layer_kind.h"

namespace grove {

std::string_view KindName(MixerKind kind) {
  switch (kind) {
    case MixerKind::kAttention:
      return "attention";
  }
  return "?";
}

std::string_view KindName(FeedForwardKind kind) {
  switch (kind) {
    case FeedForwardKind::kGated:
      return "gated feed-forward";
  }
  return "?";
}

}  // namespace grove
