// What one layer of a model computes: a token mixer (how positions exchange information) and a
// feed-forward. Each kind is one op per forward backend (forward_backend.h); a backend that lacks a
// kind refuses the model when it is loaded, naming the layer and the kind, never at the first
// forward. The families grove runs today use one kind of each in every layer; recurrent mixers
// (Gated DeltaNet) and expert feed-forwards are new values here, each with its op in every backend
// that runs it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace grove {

enum class MixerKind : uint8_t {
  kAttention,  // softmax attention over the KV cache (its variants, window and norms, are data)
  // Gated DeltaNet (Qwen3.5): a causal conv1d and a delta-rule recurrence per value head, whose
  // state (recurrent_state.h) replaces the KV cache on the layer.
  kGatedDeltaNet,
};

enum class FeedForwardKind : uint8_t {
  kGated,    // w_down (act(x w_gate) * (x w_up))
  kExperts,  // a router picks k of n gated feed-forwards per token (ops/experts.h)
};

struct LayerKind {
  MixerKind mixer = MixerKind::kAttention;
  FeedForwardKind feed_forward = FeedForwardKind::kGated;
};

// "attention", "gated feed-forward": for messages.
std::string_view KindName(MixerKind kind);
std::string_view KindName(FeedForwardKind kind);

// The kinds a backend has an op for. A kind a backend does not list is refused when a model that
// uses it is loaded there, so a kind added here runs only where its op was written.
struct BackendKinds {
  std::span<const MixerKind> mixers;
  std::span<const FeedForwardKind> feed_forwards;
};

// Throws grove::Error naming the first layer whose kind `backend` lacks, as
//   "cuda: layer 3 is gated delta-net, which this backend has no op for".
void CheckLayerKinds(std::span<const LayerKind> layers, const BackendKinds& kinds,
                     std::string_view backend);

}  // namespace grove
