// The Llama architecture as the trainer sees it: every parameter in one flat f32 buffer (so the
// optimizer, gradient clipping and checkpoints are loops over one array), named as GGUF names the
// tensors, and a graph that runs the forward pass over a batch of sequences keeping what the
// backward pass needs.
//
// The forward pass computes exactly what the inference engine computes for a llama GGUF: RMSNorm,
// adjacent-pair RoPE (the GGUF convention, so nothing is permuted on export), causal softmax
// attention with scale 1/sqrt(head_dim), SwiGLU, optional tied output. tests/train_test.cc
// (Trainer.ExportedModelGivesTheTrainersLogitsInTheInferenceEngine) checks the exported
// model's logits from `Model::Forward` against this graph's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "train/train_ops.h"

namespace grove {

class ThreadPool;

struct TrainShape {
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;  // multi-head attention: as many key/value heads as query heads
  int32_t n_ff = 0;
  int32_t n_ctx = 0;  // context length written to the model file
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_output = true;  // logits reuse token_embd (no output.weight)

  int32_t head_dim() const { return n_head > 0 ? n_embd / n_head : 0; }
  bool operator==(const TrainShape&) const = default;
};

// Throws grove::Error naming the field when a shape is impossible (zero sizes, heads that do not
// divide the width, an odd head size, sizes beyond what the trainer is meant for).
void ValidateTrainShape(const TrainShape& shape);

// "dim 384, 6 layers, 6 heads, FFN 1024, vocab 3072, tied".
std::string DescribeTrainShape(const TrainShape& shape);

struct ParamTensor {
  std::string name;            // GGUF name, e.g. "blk.0.attn_q.weight"
  std::vector<int64_t> shape;  // ne[0] (row length) first, as in GGUF
  int64_t offset = 0;          // into the flat buffer, in floats
  int64_t size = 0;
  bool is_matrix = false;  // weight decay applies to matrices only, not to norm gains
  bool frozen = false;     // not trained: no gradient is computed for it, the optimizer skips it
};

class ParamLayout {
 public:
  explicit ParamLayout(const TrainShape& shape);

  const TrainShape& shape() const { return shape_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  int64_t total() const { return total_; }
  const ParamTensor* Find(std::string_view name) const;
  // Appends a tensor beyond the model's own (a feature drafter's fusion matrix); returns its
  // offset.
  int64_t AddTensor(std::string name, std::vector<int64_t> shape, bool is_matrix) {
    return Add(std::move(name), std::move(shape), is_matrix);
  }
  // Marks the embedding, the final norm and the output frozen (a feature drafter shares its
  // target's, train/feature_trainer.h).
  void FreezeEmbeddingAndHead();
  bool frozen(int64_t offset) const;

  // Offsets of each layer's tensors, and the global ones.
  struct Layer {
    int64_t attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
  };
  const Layer& layer(int i) const { return layers_[static_cast<std::size_t>(i)]; }
  int64_t token_embd() const { return token_embd_; }
  int64_t output_norm() const { return output_norm_; }
  int64_t output() const { return output_; }  // token_embd() when tied

 private:
  int64_t Add(std::string name, std::vector<int64_t> shape, bool is_matrix);

  TrainShape shape_;
  std::vector<ParamTensor> tensors_;
  std::vector<Layer> layers_;
  int64_t total_ = 0;
  int64_t token_embd_ = 0, output_norm_ = 0, output_ = 0;
};

// GPT-2 style initialisation, deterministic for a seed: matrices ~ N(0, 0.02^2), the two
// projections that feed the residual stream (attn_output, ffn_down) scaled by 1/sqrt(2 n_layer),
// norm gains 1.
std::vector<float> InitParams(const ParamLayout& layout, uint64_t seed);

// One batch of n_seq sequences of seq_len tokens: forward with activations kept, loss, backward.
// Sized once; Forward and Backward do not allocate (beyond a few words per thread). With a pool,
// every part of both passes is split over its threads (train/parallel.h).
class TrainGraph {
 public:
  TrainGraph(const ParamLayout& layout, int n_seq, int seq_len, ThreadPool* pool = nullptr);

  int rows() const { return n_seq_ * seq_len_; }
  int n_seq() const { return n_seq_; }
  int seq_len() const { return seq_len_; }

  // Runs the forward pass over tokens (rows() ids, sequence after sequence) and returns the loss:
  // mean cross-entropy against targets, or with teacher_logits (rows() x n_vocab) the mean
  // KL(teacher || model). Both may be null: logits only (loss 0), no backward possible.
  double Forward(const float* params, const int32_t* tokens, const int32_t* targets,
                 const float* teacher_logits = nullptr);
  // Adds d(loss)/d(params) of the last Forward (which had targets or teacher logits) into grads,
  // except frozen tensors'.
  void Backward(const float* params, float* grads);

  // rows() x n_vocab logits of the last Forward.
  const float* logits() const { return logits_.data(); }

 private:
  struct LayerActs {
    std::vector<float> x_in, rstd1, h1, q, k, v, probs, att, x_mid, rstd2, h2, gate, up, act;
  };
  // Block i's backward: from dx_ = d(its output) to dx_ = d(its input), its weights' gradients
  // added into grads.
  void LayerBackward(int i, const float* params, float* grads);

  const ParamLayout& layout_;
  ThreadPool* pool_;
  TrainShape shape_;
  int n_seq_, seq_len_;
  RopeParams rope_;
  std::vector<float> rope_table_, rope_inverse_;  // (seq_len, n_rot): forward and backward angles
  std::vector<int32_t> positions_;
  std::vector<int32_t> tokens_;
  std::vector<LayerActs> acts_;
  std::vector<float> x_final_, rstd_final_, h_final_, logits_, dlogits_;
  // Backward scratch.
  std::vector<float> dx_, dx_mid_, dh_, datt_, dq_, dk_, dv_, dact_, dgate_, dup_, dprobs_;
  bool has_loss_ = false;
};

}  // namespace grove
