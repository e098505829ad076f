// The rotary embedding of one forward context: one rotation per kind of layer (Gemma 3's local
// layers rotate with a base of their own), each with the cos/sin pairs of the positions the
// context holds (each computed once: sin and cos in double were 2% of a draft model's forward) and
// of the current batch's tokens. The table fills as positions are first reached, not at load: the
// whole table of a 512-token context was 0.5 ms of the target's 4 ms load and 0.4 ms of the
// draft's (issue 30).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/aligned_buffer.h"
#include "ops/rope.h"

namespace grove {

struct ModelConfig;
struct ModelWeights;

class RotaryTables {
 public:
  RotaryTables(const ModelConfig& config, const ModelWeights& weights, int32_t n_ctx,
               int32_t max_batch);

  // The cos/sin rows of the batch's positions, for every rotation.
  void Prepare(std::span<const int32_t> positions);

  // The rotation of `layer`, and the batch's rows of it: (n, n_rot) floats, {cos, sin} pairs.
  const RopeParams& params(int32_t layer) const { return Of(layer).params; }
  const float* batch_rows(int32_t layer) const { return Of(layer).batch.data(); }
  uint64_t bytes() const;

 private:
  struct Rotation {
    RopeParams params;
    AlignedBuffer<float> table;  // (n_ctx, n_rot), rows [0, filled) computed
    int32_t filled = 0;
    AlignedBuffer<float> batch;  // (max_batch, n_rot)
  };
  const Rotation& Of(int32_t layer) const {
    return rotations_[local_rope_ && local_layers_[layer] != 0 ? 1 : 0];
  }
  // Computes the table's rows up to `rows` (and a few beyond, so that decoding fills it in steps).
  void Fill(Rotation& r, int32_t rows);

  int32_t n_ctx_;
  int32_t n_rot_;
  bool local_rope_;
  const std::vector<uint8_t>& local_layers_;  // the config's
  std::vector<Rotation> rotations_;  // [0]: global layers; [1]: local ones, when they differ
};

}  // namespace grove
