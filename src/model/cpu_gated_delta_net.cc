// The Gated DeltaNet layer kind of the CPU backend (cpu_forward.h): the four input projections,
// each token through its sequence's recurrent state (ops/gated_delta_net.h), the output
// projection.
#include "model/batch_layout.h"
#include "model/config.h"
#include "model/cpu_forward.h"
#include "model/model_parameters.h"
#include "model/recurrent_state.h"
#include "model/weights.h"
#include "ops/gated_delta_net.h"
#include "ops/parallel.h"

namespace grove {

void CpuForward::GatedDeltaNet(const ForwardInput& input, int32_t layer) {
  const ModelConfig& c = config_;
  const GatedDeltaNetShape& shape = c.gdn;
  const GatedDeltaNetWeights& w = weights_.layers[layer].gdn;
  const int32_t n = input.layout.size();
  const MatMulOutput projections[] = {{w.qkv, gdn_qkv_.data()},
                                      {w.z, gdn_z_.data()},
                                      {w.beta, gdn_beta_.data()},
                                      {w.alpha, gdn_alpha_.data()}};
  if (CanFuseMatMuls(projections)) {
    MatMulFused(projections, xb_.data(), n, matmul_scratch_, pool_);
  } else {
    for (const MatMulOutput& out : projections)
      MatMul(out.w, xb_.data(), n, out.y, matmul_scratch_, pool_);
  }
  const GatedDeltaNetDims dims{.conv_kernel = shape.conv_kernel,
                               .d_state = shape.d_state,
                               .n_k_heads = shape.n_k_heads,
                               .n_v_heads = shape.n_v_heads,
                               .eps = c.rms_eps};
  const GatedDeltaNetParams params{
      .conv = w.conv.data(), .dt_bias = w.dt_bias.data(), .a = w.a.data(), .norm = w.norm.data()};
  const std::size_t conv_dim = shape.conv_dim();
  const std::size_t value_dim = shape.value_dim();
  const std::size_t heads = shape.n_v_heads;
  // Token by token in batch order: each one reads the state its sequence's previous token left
  // (the chunked form for prefill is a later step).
  for (int32_t i = 0; i < n; ++i) {
    const int32_t seq = input.batch.seq_ids[i];
    const auto row = static_cast<std::size_t>(i);
    recurrent_->Record(seq, layer, input.batch.positions[i], gdn_qkv_.data() + row * conv_dim,
                       gdn_beta_.data() + row * heads, gdn_alpha_.data() + row * heads);
    GatedDeltaNetToken(
        dims, params,
        {.conv = recurrent_->conv(seq, layer), .delta = recurrent_->delta(seq, layer)},
        gdn_qkv_.data() + row * conv_dim, gdn_z_.data() + row * value_dim,
        gdn_beta_.data() + row * heads, gdn_alpha_.data() + row * heads,
        gdn_out_.data() + row * value_dim);
  }
  MatMul(w.out, gdn_out_.data(), n, proj_.data(), matmul_scratch_, pool_);
}

}  // namespace grove
