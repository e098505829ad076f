// The feature drafter (speculate/feature_drafter.h) as the trainer sees it: one decoder layer of
// the target's shape over u = fc [e(x_t); f_{t-1}], the target's embedding, final norm and head
// frozen in the same flat buffer (ParamLayout), and two losses:
//
//   KL(target || drafter) of the next token's distribution (the target's logits at t),
//   weighted by logit_weight: the paper's cross-entropy against the target's distribution, whose
//   gradient it is;
//   smooth L1 between the layer's output g_t and the target's feature f_t (EAGLE's
//   regression term, mean over rows and width), weighted by feature_weight.
//
// Row r of a window reads the token of position r and the target's feature of position r - 1 (zero
// for the window's first row, as for the first position at inference), and learns the target's
// distribution of the token after r and its feature at r.
#pragma once

#include <cstdint>
#include <vector>

#include "train/train_model.h"

namespace grove {

class ThreadPool;

// The one-layer layout of a drafter for a target of `target` shape (its width, heads, FFN,
// vocabulary, context, RoPE and norm), with fc.weight appended and the embedding, final norm and
// output frozen.
ParamLayout FeatureDrafterLayout(const TrainShape& target);
// Offset of fc.weight in that layout.
int64_t FusionOffset(const ParamLayout& layout);

struct FeatureLoss {
  double total = 0;    // logit_weight * kl + feature_weight * feature
  double kl = 0;       // mean KL(target || drafter) per row
  double feature = 0;  // mean smooth L1 per element
};

class FeatureDrafterGraph {
 public:
  FeatureDrafterGraph(const ParamLayout& layout, int n_seq, int seq_len, ThreadPool* pool);

  int rows() const { return graph_.rows(); }

  // tokens: rows() ids (x_t); features: rows() x n_embd (f_{t-1}); teacher_logits: rows() x
  // n_vocab (the target's logits at t); next_features: rows() x n_embd (f_t). The last two may be
  // null for logits only (no backward).
  FeatureLoss Forward(const float* params, const int32_t* tokens, const float* features,
                      const float* teacher_logits, const float* next_features,
                      float logit_weight = 0.1f, float feature_weight = 1.0f);
  // Adds the gradients of the last Forward's total loss into grads (frozen tensors left alone).
  void Backward(const float* params, float* grads);

  const float* logits() const { return graph_.logits(); }
  const float* output_hidden() const { return graph_.final_hidden(); }

 private:
  const ParamLayout& layout_;
  ThreadPool* pool_;
  int64_t fc_;
  TrainGraph graph_;
  std::vector<float> concat_;   // rows x 2 n_embd: [e(x); f]
  std::vector<float> fused_;    // rows x n_embd: the layer's input
  std::vector<float> d_final_;  // rows x n_embd: the feature term's gradient on g
  std::vector<float> d_fused_;
};

}  // namespace grove
