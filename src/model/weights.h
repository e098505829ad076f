// Weights bound in place from a GGUF file: matrices stay in the memory map (no copy); the small
// vectors (norms, biases, rope factors) are converted to f32 once, since they are read for every
// token. Which tensors a layer has is the family's (family.h): a vector that the family does not
// have stays empty, and the forward skips the step it would feed.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "model/config.h"
#include "ops/experts.h"
#include "ops/matmul.h"

namespace grove {

class GgufFile;

// A Gated DeltaNet layer's tensors (Qwen3.5; config.h's GatedDeltaNetShape).
struct GatedDeltaNetWeights {
  WeightView qkv;              // attn_qkv: (conv_dim rows, n_embd), q, k then v channels
  WeightView z;                // attn_gate: (value_dim rows, n_embd), the output norm's gate
  WeightView beta;             // ssm_beta: (n_v_heads rows, n_embd)
  WeightView alpha;            // ssm_alpha: (n_v_heads rows, n_embd)
  WeightView out;              // ssm_out: (n_embd rows, value_dim)
  std::vector<float> conv;     // ssm_conv1d: (conv_dim, conv_kernel), taps oldest first
  std::vector<float> dt_bias;  // ssm_dt.bias: (n_v_heads)
  std::vector<float> a;        // ssm_a: (n_v_heads), -exp(A_log) as the converter writes it
  std::vector<float> norm;     // ssm_norm: (d_state), RMSNorm weight of each value head
};

struct LayerWeights {
  std::vector<float> attn_norm;       // (n_embd)
  WeightView wq;                      // (q_dim rows, n_embd); rows of attn_qkv when fused
  WeightView wk;                      // (kv_dim rows, n_embd)
  WeightView wv;                      // (kv_dim rows, n_embd)
  std::vector<float> bq;              // (q_dim) or empty: Q bias (Qwen2)
  std::vector<float> bk;              // (kv_dim) or empty
  std::vector<float> bv;              // (kv_dim) or empty
  std::vector<float> q_norm;          // (head_dim) or empty: RMSNorm weight of each Q head (Qwen3)
  std::vector<float> k_norm;          // (head_dim) or empty
  WeightView wo;                      // (n_embd rows, q_dim)
  std::vector<float> bo;              // (n_embd) or empty: output bias (gpt-oss)
  std::vector<float> attn_sinks;      // (n_head) or empty: each head's sink logit (gpt-oss)
  std::vector<float> attn_post_norm;  // (n_embd) or empty: norm of the attention output (Gemma 3)
  std::vector<float> ffn_norm;        // (n_embd)
  WeightView w_gate;                  // (n_ff rows, n_embd); the first n_ff rows of a fused ffn_up
  WeightView w_up;                    // (n_ff rows, n_embd)
  WeightView w_down;                  // (n_embd rows, n_ff)
  ExpertWeights experts;              // a mixture's (kExperts), instead of w_gate/w_up/w_down
  // A mixture's shared expert (family shared_expert): w_gate, w_up and w_down hold its
  // ffn_*_shexp matrices, and this its gate, ffn_gate_inp_shexp (n_embd); empty otherwise.
  std::vector<float> shared_expert_gate;
  std::vector<float> ffn_post_norm;  // (n_embd) or empty
  GatedDeltaNetWeights gdn;          // on a kGatedDeltaNet layer, whose wq to wo stay empty
};

struct ModelWeights {
  WeightView token_embd;                 // (n_vocab rows, n_embd)
  std::vector<float> output_norm;        // (n_embd)
  WeightView output;                     // (n_vocab rows, n_embd); token_embd when tied
  std::vector<float> rope_freq_factors;  // (n_rot / 2) or empty: per-frequency divisors (Llama 3.1)
  std::vector<float> rope_factors_long;  // (n_rot / 2) or empty: LongRoPE beyond rope_orig_ctx
  std::vector<float> rope_factors_short;  // (n_rot / 2) or empty: LongRoPE within it
  std::vector<LayerWeights> layers;
};

// The matrices a forward pass multiplies with: the output, then each layer's seven (a mixture's
// layer leaves w_gate, w_up and w_down empty; its experts are ExpertMatrices).
std::vector<WeightView*> ForwardMatrices(ModelWeights& weights);
std::array<WeightView*, 7> LayerMatrices(LayerWeights& layer);
// A Gated DeltaNet layer's five matrices (empty views on another layer).
std::array<WeightView*, 5> GatedDeltaNetMatrices(LayerWeights& layer);
// A mixture's router and expert matrices (null views in other layers). They keep the GGUF
// layout: packing an expert's rows into groups is not done yet.
std::array<const WeightView*, 4> ExpertMatrices(const LayerWeights& layer);

// One matrix of the file by name, checked as BindWeights checks the model's: present, (n_out rows
// of n_in), a type grove computes with (a feature drafter's fusion matrix is bound this way).
WeightView BindMatrix(const GgufFile& gguf, const std::string& name, int64_t n_in, int64_t n_out);

// Binds and validates every tensor: presence, shape against the config, a type grove can compute
// with. Errors name the tensor: "model: tensor 'blk.3.attn_q.weight': expected 2048x2048, got ...".
// Every tensor of the file must be one the architecture uses (or a drafter file's own, see
// drafter_file.h): the first one that is not is named, since a tensor left out means the file is
// not what its metadata says (a Qwen2 file relabelled 'llama' would run without its biases).
ModelWeights BindWeights(const GgufFile& gguf, const ModelConfig& config);

}  // namespace grove
