// The gated feed-forward of a batch of rows, the block every family grove runs has after its
// mixer (and an expert of a mixture will have): out = w_down (act(x w_gate) * (x w_up)).
#pragma once

#include <cstdint>

#include "ops/activation.h"
#include "ops/matmul.h"

namespace grove {

struct GatedFeedForwardWeights {
  const WeightView& gate;  // (n_ff rows, n_in)
  const WeightView& up;    // (n_ff rows, n_in)
  const WeightView& down;  // (n_out rows, n_ff)
  GateActivation activation;
  // Added to each row of x w_gate, x w_up (n_ff) and of the output (n_out) where not null
  // (gpt-oss's experts).
  const float* gate_bias = nullptr;
  const float* up_bias = nullptr;
  const float* down_bias = nullptr;
};

// out (n, down.n_out) from x (n, gate.n_in); gate and up are (n, n_ff) scratch, gate left holding
// the activation. Bits independent of n and the thread count (contract 2). Does not allocate.
void GatedFeedForward(const GatedFeedForwardWeights& w, const float* x, int32_t n, float* gate,
                      float* up, float* out, MatMulScratch& scratch, ThreadPool& pool);

}  // namespace grove
