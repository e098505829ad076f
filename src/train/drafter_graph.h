// The feature drafters (speculate/feature_drafter.h) as the trainer sees them: one decoder layer of
// the target's shape over u = fc [e(x_t); f_{t-1}], the target's embedding, final norm and head
// frozen in the same flat buffer (ParamLayout), and, for the parallel drafter, K mask embeddings.
//
// Rows. Each window of seq_len tokens gives seq_len real rows: row t reads token x_t and the
// target's feature f_{t-1} (zero for the window's first row, as for position 0 at inference), at
// position t, and sees the real rows before it. With K masks, each real row t (the anchor) is
// followed by its group of mask rows j = 1..K (ParallelSpec's group-wise layout, paper §4.1): mask
// j reads fc [m_j; 0] at position t + j and sees the real rows 0..t and its own group's masks
// 1..j, which is exactly what the inference drafter's mask row j sees after the prefix x_0..x_t.
// A mask row is kept when its label lies in the window (t + j < seq_len).
//
// Labels. A row standing for position p (real row p, or mask j of anchor p - j) learns the
// target's distribution of the token after p (KL(target || drafter), the paper's cross-entropy
// against the target's distribution, whose gradient it is) with weight logit_weight, and the
// target's feature f_p (EAGLE's smooth L1 regression, mean over the width) with weight
// feature_weight. Mask j's terms are weighted mask_decay^j (Medusa's λ_k = 0.8^k; the paper leaves
// λ_k open). Both losses are summed over rows and divided by the real rows, so K = 0 is the
// autoregressive drafter's loss.
//
// The ablation of the paper's §4.1 (MaskVisibility::kAcrossGroups) lets every row also see every
// earlier group's masks (the interleaved sequence x_0 M.. x_1 M.. under a plain causal mask): the
// mismatch between training and inference that group-wise training removes.
#pragma once

#include <cstdint>
#include <vector>

#include "train/train_model.h"

namespace grove {

class ThreadPool;

// The one-layer layout of a drafter for a target of `target` shape (its width, heads, FFN,
// vocabulary, context, RoPE and norm), with fc.weight and, for masks > 0, mask_embd.weight
// appended; the embedding, final norm and output frozen.
ParamLayout DrafterLayout(const TrainShape& target, int32_t masks);
int64_t FusionOffset(const ParamLayout& layout);
int32_t LayoutMasks(const ParamLayout& layout);  // K, from mask_embd.weight (0 without)

enum class MaskVisibility { kGroupWise, kAcrossGroups };

struct DrafterLoss {
  double total = 0;    // logit_weight * kl + feature_weight * feature
  double kl = 0;       // weighted KL summed over rows / real rows
  double feature = 0;  // weighted smooth L1 summed over rows and width / (real rows * width)
};

struct DrafterGraphOptions {
  MaskVisibility visibility = MaskVisibility::kGroupWise;
  float mask_decay = 0.8f;    // λ_j = mask_decay^j
  float logit_weight = 0.1f;  // EAGLE's weights: 0.1 on the distribution, 1 on the feature
  float feature_weight = 1.0f;
};

class DrafterGraph {
 public:
  DrafterGraph(const ParamLayout& layout, int n_seq, int seq_len,
               const DrafterGraphOptions& options, ThreadPool* pool = nullptr);

  int real_rows() const { return n_seq_ * seq_len_; }
  int rows() const { return static_cast<int>(position_.size()); }
  int masks() const { return masks_; }
  // The row of mask j (1..K) of anchor t in sequence s; -1 when its label is past the window. The
  // real row of (s, t) is s * seq_len + t.
  int MaskRow(int s, int t, int j) const;
  // The real row whose labels row r learns (itself for a real row, the anchor's + j for a mask).
  int LabelRow(int r) const { return label_row_[static_cast<std::size_t>(r)]; }
  // The tree depth row r drafts at inference: 1 for a real row, j + 1 for mask j.
  int DepthOfRow(int r) const { return mask_of_row_[static_cast<std::size_t>(r)] + 1; }

  // tokens: real_rows() ids (x_t); features: real_rows() x n_embd (f_{t-1}, zero at t = 0);
  // teacher_logits: real_rows() x n_vocab (the target's logits at t); next_features: real_rows()
  // x n_embd (f_t). The last two may be null for logits only (no backward).
  DrafterLoss Forward(const float* params, const int32_t* tokens, const float* features,
                      const float* teacher_logits, const float* next_features);
  // Adds the gradients of the last Forward's total loss into grads (frozen tensors left alone).
  void Backward(const float* params, float* grads);

  // rows() x n_vocab logits of the last Forward: real rows first, then mask rows.
  const float* logits() const { return logits_.data(); }

 private:
  void BuildRows();
  // The steps of Forward: the rows' inputs (token embedding beside the feature, or a mask's
  // embedding beside zeros), the layer and head, and the losses against the teacher.
  void ConcatInputs(const float* params, const int32_t* tokens, const float* features);
  void LayerForward(const float* params);
  double FeatureLoss(const float* next_features);
  // The steps of Backward, from the head down to the fusion matrix and the mask embeddings.
  void FfnBackward(const float* params, float* grads);
  void AttentionBackward(const float* params, float* grads);
  void FusionBackward(const float* params, float* grads);

  const ParamLayout& layout_;
  DrafterGraphOptions options_;
  ThreadPool* pool_;
  int n_seq_, seq_len_, masks_;
  int64_t fc_, mask_embd_;
  RopeParams rope_;
  std::vector<float> rope_table_, rope_inverse_;
  // Per row: position, the real row of its labels, its mask index (0 real), its loss weight, the
  // rows it sees.
  std::vector<int32_t> position_, label_row_, mask_of_row_, first_mask_row_;
  std::vector<float> weight_;
  std::vector<int32_t> visible_begin_, visible_;
  std::vector<float> kl_weight_;  // weight_ * logit_weight / real rows
  bool has_loss_ = false;
  // Activations (rows x width unless noted).
  std::vector<float> concat_;  // rows x 2 n_embd
  std::vector<float> x_in_, rstd1_, h1_, q_, k_, v_, probs_, att_, x_mid_, rstd2_, h2_, gate_, up_,
      act_, g_, rstd_f_, h_f_, logits_, dlogits_, teacher_rows_, d_g_;
  // Backward scratch.
  std::vector<float> dh_, dx_mid_, dx_in_, datt_, dq_, dk_, dv_, dact_, dgate_, dup_, dconcat_;
};

}  // namespace grove
