// Whether a model's caches may keep a prefix of one sequence's tokens for the next (a
// conversation's next turn, a later request): a KV cache can be cut back to any prefix of its
// chain (KvCache::MatchingPrefix), but a recurrent layer's state holds only the latest position.
// Until such a layer keeps checkpoints it can resume from, a model with one is prefilled cold.
#pragma once

#include <algorithm>

#include "model/config.h"
#include "model/layer_kind.h"

namespace grove {

// True when every layer's token mixer is attention over the KV cache (the only mixer that can be
// rewound to a prefix today; a new kind is refused here until it says how it resumes).
inline bool PrefixReusable(const ModelConfig& config) {
  return std::all_of(config.layer_kinds.begin(), config.layer_kinds.end(),
                     [](const LayerKind& k) { return k.mixer == MixerKind::kAttention; });
}

}  // namespace grove
