// The model families grove runs, each described by what it does differently from Llama. A family is
// data, not a code path: the loader reads the file's architecture, finds its family here, and the
// one layer function (model.cc) applies whatever the family and the file say.
//
// Why a table of traits and not a graph builder per family (llama.cpp's way): the families people
// run differ by a handful of switches on one transformer block, so a builder per family would
// repeat the block once per family, and every fix would need the same edit in each. gemma.cpp's way
// (one config struct per model, one layer function) keeps one block; the switches are per family
// here and the numbers (window, rope bases, head size) per file, in ModelConfig. A family that is
// not one more switch (state-space layers) is refused by name; a mixture of experts is a layer
// kind (layer_kind.h) the family names.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "model/layer_kind.h"
#include "ops/activation.h"
#include "ops/rope.h"
#include "ops/router_rule.h"

namespace grove {

// What the family does with `<arch>.attention.sliding_window`.
enum class WindowRule : uint8_t {
  kRefused,      // a window is an error: the family has none, so the key means a mislabelled file
  kEveryLayer,   // every layer sees only the window (Mistral 7B's `llama` files)
  kLocalGlobal,  // local layers see the window, every n-th layer sees everything (Gemma 3)
  kNotApplied,   // warned and not applied: Phi-3 files carry a window the model does not use
                 // consistently; llama.cpp disables it too
};

// Per-frequency RoPE divisors the family reads from tensors.
enum class RopeFactorRule : uint8_t {
  kNone,
  kFrequencies,  // rope_freqs.weight, when present (Llama 3.1+)
  kLongShort,    // rope_factors_long/short.weight, when present (Phi-3.5, Phi-4: LongRoPE)
};

struct ModelFamily {
  std::string_view arch;    // general.architecture
  std::string_view models;  // the models people know it by, for messages and docs
  // Which dimensions rotate together (ops/rope.h): adjacent in `llama` files, whose converter
  // permutes the Q and K rows; halves in every other family (the Hugging Face layout, kept).
  RopePairing rope = RopePairing::kAdjacent;
  GateActivation activation = GateActivation::kSilu;  // of the gated feed-forward
  bool qkv_bias = false;                              // Q, K and V projections add a bias (Qwen2)
  bool output_bias = false;  // attn_output adds a bias, attn_output.bias (gpt-oss)
  // Each head has a learned logit, attn_sinks (n_head), that joins the softmax's denominator and
  // carries no value: a head can attend to nothing (gpt-oss).
  bool attention_sinks = false;
  bool qk_norm = false;         // each head of Q and K is RMS-normalised before rotation
  bool sandwich_norms = false;  // each sub-layer's output is RMS-normalised before the residual add
  bool scaled_embedding = false;  // embeddings are multiplied by sqrt(n_embd)
  bool fused_qkv = false;         // attn_qkv.weight (Q, K, V rows) may replace attn_q/k/v (Phi-3)
  bool fused_gate_up = false;     // ffn_up.weight holds gate rows then up rows, 2 n_ff (Phi-3)
  WindowRule window = WindowRule::kRefused;
  // kLocalGlobal: every n-th layer is global unless the file says otherwise.
  int32_t global_layer_period = 0;
  // kLocalGlobal: local layers rotate with their own base (rope.freq_base_swa, 10000 when absent)
  // and no scaling (Gemma 3). Otherwise they rotate as the global ones, unless the file sets
  // rope.freq_base_swa (gpt-oss, as llama.cpp reads it).
  bool local_rope_apart = false;
  RopeFactorRule rope_factors = RopeFactorRule::kNone;
  bool logit_softcap = false;  // final_logit_softcapping is read (Gemma)
  // Hybrid layers (Qwen3.5): every full_attention_interval-th layer is attention, the others are
  // Gated DeltaNet (layer_kind.h), shaped by the ssm.* keys (config.h, GatedDeltaNetShape).
  bool gated_delta_net = false;
  // attn_q.weight holds each head's query then its output gate (2 q_dim rows); the attention
  // output is multiplied by sigmoid(gate) before attn_output (Qwen3.5).
  bool gated_attention = false;
  // The norm before the feed-forward: "ffn_norm", or "post_attention_norm" where the converter
  // keeps Hugging Face's name for it (Qwen3.5; not Gemma's sandwich norm).
  std::string_view ffn_norm = "ffn_norm";
  // What every layer's feed-forward is: kExperts reads expert_count, expert_used_count and
  // expert_feed_forward_length, and binds ffn_gate_inp and the ffn_*_exps tensors (Qwen3-MoE).
  FeedForwardKind feed_forward = FeedForwardKind::kGated;
  // Beside the routed experts, every layer runs a shared expert: a gated feed-forward of
  // expert_shared_feed_forward_length (ffn_gate/up/down_shexp) whose output is multiplied by
  // sigmoid(x . ffn_gate_inp_shexp) and added to the experts' sum (Qwen3.5-MoE).
  bool shared_expert = false;
  RouterRule router = RouterRule::kSoftmaxTopKNormalized;
  // The router's logits and each expert's gate, up and down add biases: ffn_gate_inp.bias and
  // ffn_{gate,up,down}_exps.bias of (n_ff_expert or n_embd, n_expert) (gpt-oss).
  bool expert_biases = false;
};

// The family of an architecture. Throws grove::Error naming the architecture when grove does not
// run it (Mixture-of-Experts architectures are named as such).
const ModelFamily& FindFamily(std::string_view arch);
std::span<const ModelFamily> ModelFamilies();
// "llama, qwen2, qwen3, gemma3, phi3, qwen35, qwen3moe, qwen35moe"
std::string FamilyList();

}  // namespace grove
