#include "model/rotary_tables.h"

#include <algorithm>
#include <cstring>

#include "model/config.h"
#include "model/forward_backend.h"
#include "model/weights.h"

namespace grove {

RotaryTables::RotaryTables(const ModelConfig& c, const ModelWeights& w, int32_t n_ctx,
                           int32_t max_batch)
    : n_ctx_(n_ctx),
      n_rot_(c.n_rot),
      local_rope_(c.local_rope && c.sliding_window > 0),
      local_layers_(c.local_layers) {
  // LongRoPE's factors: the long ones when this context is longer than the one the model was
  // first trained for (as llama.cpp chooses, by the context of one sequence).
  const std::vector<float>& factors = !w.rope_freq_factors.empty() ? w.rope_freq_factors
                                      : n_ctx > c.rope_orig_ctx    ? w.rope_factors_long
                                                                   : w.rope_factors_short;
  const RopeParams global{.head_dim = c.head_dim,
                          .n_rot = c.n_rot,
                          .freq_base = c.rope.freq_base,
                          .freq_scale = c.rope.freq_scale,
                          .freq_factors = factors.empty() ? nullptr : factors.data(),
                          .pairing = c.family->rope,
                          .attn_factor = c.rope_attn_factor,
                          .ext_factor = c.yarn.ext_factor,
                          .beta_fast = c.yarn.beta_fast,
                          .beta_slow = c.yarn.beta_slow,
                          .n_ctx_orig = c.rope_orig_ctx};
  rotations_.resize(c.local_rope ? 2 : 1);
  rotations_[0].params = global;
  if (c.local_rope) {
    rotations_[1].params = global;
    rotations_[1].params.freq_base = c.rope_local.freq_base;
    rotations_[1].params.freq_scale = c.rope_local.freq_scale;
  }
  for (Rotation& r : rotations_) {
    r.table.Resize(static_cast<std::size_t>(n_ctx) * c.n_rot);
    r.batch.Resize(static_cast<std::size_t>(max_batch) * c.n_rot);
    r.batch.ZeroFirst(kPrefaultedRows * c.n_rot);
  }
}

uint64_t RotaryTables::bytes() const {
  uint64_t n = 0;
  for (const Rotation& r : rotations_) n += (r.table.size() + r.batch.size()) * sizeof(float);
  return n;
}

void RotaryTables::Prepare(std::span<const int32_t> positions) {
  // Rotations from the table of every position the context can hold; positions past it are
  // computed.
  const auto n_rot = static_cast<std::size_t>(n_rot_);
  for (Rotation& r : rotations_) {
    for (std::size_t i = 0; i < positions.size(); ++i) {
      float* cs = r.batch.data() + i * n_rot;
      if (positions[i] < n_ctx_) {
        Fill(r, positions[i] + 1);
        std::memcpy(cs, r.table.data() + positions[i] * n_rot, n_rot * sizeof(float));
      } else {
        RopeAngles(r.params, positions[i], cs);
      }
    }
  }
}

void RotaryTables::Fill(Rotation& r, int32_t rows) {
  if (rows <= r.filled) return;
  constexpr int32_t kRowsPerFill = 64;
  const int32_t end = std::min(n_ctx_, std::max(rows, r.filled + kRowsPerFill));
  const auto n_rot = static_cast<std::size_t>(n_rot_);
  for (int32_t pos = r.filled; pos < end; ++pos) {
    RopeAngles(r.params, pos, r.table.data() + static_cast<std::size_t>(pos) * n_rot);
  }
  r.filled = end;
}

}  // namespace grove
