// What one layer of a model computes: a token mixer (how positions exchange information) and a
// feed-forward. Each kind is one op per forward backend (forward_backend.h); a backend that lacks a
// kind refuses the model when it is loaded, naming the layer and the kind, never at the first
// forward. The families grove runs today use one kind of each in every layer; recurrent mixers
// (Gated DeltaNet) and expert feed-forwards are new values here, each with its op in every backend
// that runs it.
#pragma once

#include <cstdint>
#include <string_view>

namespace grove {

enum class MixerKind : uint8_t {
  kAttention,  // softmax attention over the KV cache (its variants, window and norms, are data)
};

enum class FeedForwardKind : uint8_t {
  kGated,  // w_down (act(x w_gate) * (x w_up))
};

struct LayerKind {
  MixerKind mixer = MixerKind::kAttention;
  FeedForwardKind feed_forward = FeedForwardKind::kGated;
};

// "attention", "gated feed-forward": for messages.
std::string_view KindName(MixerKind kind);
std::string_view KindName(FeedForwardKind kind);

}  // namespace grove
