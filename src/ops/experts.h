// A mixture of experts: a router scores n_expert gated feed-forwards (feed_forward.h) for each
// row, the row runs through the k it scores highest, and its output is their sum weighted by the
// router. This is the feed-forward of Qwen3-MoE (Qwen3-30B-A3B: 128 experts, 8 used, each 768
// wide), where a token reads 8 / 128 of the feed-forward weights.
//
// Batched: the rows of a batch (a prefill, a tree, several sequences) are grouped by expert, and
// each expert that any row chose multiplies all of its rows in one matmul, so its weights are
// streamed once per batch, not once per row; an expert no row chose is not read. This is why
// verifying n tree tokens of a mixture costs the union of their experts, not n times one token.
#pragma once

#include <cstdint>

#include <vector>
#include "base/aligned_buffer.h"

#include "ops/activation.h"
#include "ops/matmul.h"
#include "ops/router_rule.h"

namespace grove {

// The experts of one layer, the 3-D tensors of the file (n_in, n_ff, n_expert in ggml's order)
// seen as matrices of n_expert blocks of rows: expert e's rows of `gate` are [e * n_ff, (e + 1) *
// n_ff).
struct ExpertWeights {
  WeightView router;  // (n_expert rows, n_embd): ffn_gate_inp, the router's logits
  WeightView gate;    // (n_expert * n_ff rows, n_embd): ffn_gate_exps
  WeightView up;      // (n_expert * n_ff rows, n_embd): ffn_up_exps
  WeightView down;    // (n_expert * n_embd rows, n_ff): ffn_down_exps
  int32_t n_expert = 0;
  int32_t n_used = 0;  // experts each row runs through (expert_used_count)
  RouterRule rule = RouterRule::kSoftmaxTopKNormalized;
  // Biases (gpt-oss), or empty: the router's (n_expert), and each expert's gate and up (n_ff)
  // and down (n_embd), expert after expert.
  std::vector<float> router_bias;
  std::vector<float> gate_bias;
  std::vector<float> up_bias;
  std::vector<float> down_bias;

  // Expert e's slice of gate, up or down: a plain matrix of its rows.
  static WeightView Slice(const WeightView& w, int32_t n_expert, int32_t e);
};

// The router's choice for each row: the n_used experts in order of decreasing probability, and
// each one's weight, by the family's rule.
//
// Qwen3-MoE's rule, as llama.cpp's qwen3moe builder applies it (build_moe_ffn with the softmax
// gating and norm_w = true): probabilities are the softmax of the logits over all n_expert
// experts; the top n_used are taken; their probabilities are divided by their sum (the sum
// clamped below at 2^-14 = 6.1e-5, the smallest normal f16, as llama.cpp does). llama.cpp's
// expert_weights_scale is not applied by its qwen3moe builder (the key is left unread there and
// here). Ties between equal probabilities go to the lower expert index (llama.cpp's argsort
// leaves their order unspecified; random or trained weights do not tie).
//
// gpt-oss's rule (kTopKSoftmax, llama.cpp's softmax-weight gating with norm_w = false): the top
// n_used logits, then a softmax over those n_used. probs: (n_expert) scratch.
void RouteRow(RouterRule rule, const float* logits, int32_t n_expert, int32_t n_used,
              int32_t* experts, float* weights, float* probs);

// Forward state of ExpertFeedForward, sized at load for batches of up to max_rows rows so that
// the token loop never allocates.
class ExpertScratch {
 public:
  ExpertScratch() = default;
  ExpertScratch(int32_t max_rows, int32_t n_expert, int32_t n_used, int64_t n_embd, int64_t n_ff);

  // Bytes of its buffers.
  uint64_t bytes() const;
  // Faults in the pages that batches of up to `rows` rows use.
  void Prefault(int32_t rows);
  // Experts the last call read (the union of its rows' choices): what a batch costs.
  int32_t last_experts_read() const { return last_experts_read_; }

 private:
  friend void ExpertFeedForward(const ExpertWeights&, GateActivation, const float*, int32_t, float*,
                                ExpertScratch&, MatMulScratch&, ThreadPool&);
  int32_t max_rows_ = 0;
  int32_t n_used_ = 0;
  AlignedBuffer<float> logits_;    // (max_rows, n_expert) router logits
  AlignedBuffer<float> probs_;     // (max_rows, n_expert) RouteRow's scratch
  AlignedBuffer<int32_t> chosen_;  // (max_rows, n_used) expert of each row's rank
  AlignedBuffer<float> weights_;   // (max_rows, n_used) its weight
  AlignedBuffer<int32_t> slot_;    // (max_rows, n_used) where that row's copy sits in x_, out_
  AlignedBuffer<int32_t> first_;   // (n_expert + 1) first slot of each expert's rows
  AlignedBuffer<int32_t> filled_;  // (n_expert) slots filled so far while grouping
  AlignedBuffer<float> x_;         // (max_rows * n_used, n_embd) rows grouped by expert
  AlignedBuffer<float> gate_;      // (max_rows * n_used, n_ff)
  AlignedBuffer<float> up_;        // (max_rows * n_used, n_ff)
  AlignedBuffer<float> out_;       // (max_rows * n_used, n_embd) each expert's output rows
  int32_t last_experts_read_ = 0;
};

// out (n, n_embd) from x (n, n_embd): for each row, sum over its ranks j = 0 .. n_used - 1, in
// that order, of weight_j * expert_j(x). Each expert computes its rows with the matmuls of
// feed_forward.h, whose rows do not depend on the other rows of the call, and each row's sum runs
// over its own ranks in a fixed order, so a row's output is bit-identical alone or in any batch
// (contract 2). Requires n <= the scratch's max_rows and a matmul scratch of max_rows rows of
// max(n_embd, n_ff). Does not allocate.
void ExpertFeedForward(const ExpertWeights& w, GateActivation activation, const float* x, int32_t n,
                       float* out, ExpertScratch& scratch, MatMulScratch& matmul_scratch,
                       ThreadPool& pool);

}  // namespace grove
