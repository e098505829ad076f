// The Gated DeltaNet layer kind of the CPU backend (cpu_forward.h): the four input projections,
// each token through its sequence's recurrent state (recurrent_state.h, ops/gated_delta_net.h),
// the output projection.
#include "model/batch_layout.h"
#include "model/config.h"
#include "model/cpu_forward.h"
#include "model/model_parameters.h"
#include "model/recurrent_state.h"
#include "model/weights.h"
#include "ops/parallel.h"

namespace grove {

void CpuForward::GatedDeltaNet(const ForwardInput& input, int32_t layer) {
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
  // Each token through the state its sequence's walk gives it (recurrent_state.h: a chain in
  // order, a tree depth first).
  recurrent_->RunLayer(layer, gdn_qkv_.data(), gdn_z_.data(), gdn_beta_.data(), gdn_alpha_.data(),
                       gdn_out_.data());
  MatMul(w.out, gdn_out_.data(), n, proj_.data(), matmul_scratch_, pool_);
}

}  // namespace grove
