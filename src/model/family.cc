#include "model/family.h"

#include <array>

#include "base/error.h"

namespace grove {
namespace {

// Facts about each architecture as llama.cpp's converter writes it and llama.cpp runs it (its
// src/models/<arch>.cpp), which the tests check against node-llama-cpp.
constexpr std::array<ModelFamily, 9> kFamilies = {{
    {
        .arch = "llama",
        .models = "Llama 2/3.x, TinyLlama, SmolLM2, Mistral 7B",
        .window = WindowRule::kEveryLayer,
        .rope_factors = RopeFactorRule::kFrequencies,
    },
    {
        .arch = "qwen2",
        .models = "Qwen2, Qwen2.5, Qwen2.5-Coder, DeepSeek-R1-Distill-Qwen",
        .rope = RopePairing::kHalves,
        .qkv_bias = true,
    },
    {
        .arch = "qwen3",
        .models = "Qwen3",
        .rope = RopePairing::kHalves,
        .qk_norm = true,
    },
    {
        .arch = "gemma3",
        .models = "Gemma 3 (text)",
        .rope = RopePairing::kHalves,
        .activation = GateActivation::kGeluTanh,
        .qk_norm = true,
        .sandwich_norms = true,
        .scaled_embedding = true,
        .window = WindowRule::kLocalGlobal,
        .global_layer_period = 6,
        .local_rope_apart = true,
        .logit_softcap = true,
    },
    {
        .arch = "phi3",
        .models = "Phi-3, Phi-3.5, Phi-4-mini",
        .rope = RopePairing::kHalves,
        .fused_qkv = true,
        .fused_gate_up = true,
        .window = WindowRule::kNotApplied,
        .rope_factors = RopeFactorRule::kLongShort,
    },
    {
        // Qwen3.5/3.6 dense: three Gated DeltaNet layers to one gated full-attention layer. Its
        // rotation is llama.cpp's interleaved multi-section one (IMROPE), which for text (every
        // section at the token's position) is the halves pairing over rope.dimension_count.
        .arch = "qwen35",
        .models = "Qwen3.5, Qwen3.6 (dense)",
        .rope = RopePairing::kHalves,
        .qk_norm = true,
        .gated_delta_net = true,
        .gated_attention = true,
        .ffn_norm = "post_attention_norm",
    },
    {
        // Qwen3's attention (per-head Q/K norms, no biases) over a mixture of experts: llama.cpp's
        // src/models/qwen3moe.cpp.
        .arch = "qwen3moe",
        .models = "Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-30B-A3B",
        .rope = RopePairing::kHalves,
        .qk_norm = true,
        .feed_forward = FeedForwardKind::kExperts,
    },
    {
        // Qwen3.5's hybrid layers over qwen3moe's experts plus a shared expert: llama.cpp's
        // src/models/qwen35moe.cpp (routing as qwen3moe's: softmax, top-k, renormalised).
        .arch = "qwen35moe",
        .models = "Qwen3.5-35B-A3B, Qwen3.6-35B-A3B",
        .rope = RopePairing::kHalves,
        .qk_norm = true,
        .gated_delta_net = true,
        .gated_attention = true,
        .ffn_norm = "post_attention_norm",
        .feed_forward = FeedForwardKind::kExperts,
        .shared_expert = true,
    },
    {
        // OpenAI's open-weight mixture: llama.cpp's src/models/openai-moe.cpp. Attention with
        // biases and a sink per head, every other layer through a sliding window (the even
        // ones), YaRN rotation from the file's rope.scaling keys; its post_attention_norm is
        // the norm before the experts; the router takes the top k of biased logits, then a
        // softmax over them; the experts have biases and the clamped SwiGLU.
        .arch = "gpt-oss",
        .models = "gpt-oss-20b, gpt-oss-120b",
        .rope = RopePairing::kHalves,
        .activation = GateActivation::kSwigluOai,
        .qkv_bias = true,
        .output_bias = true,
        .attention_sinks = true,
        .window = WindowRule::kLocalGlobal,
        .global_layer_period = 2,
        .ffn_norm = "post_attention_norm",
        .feed_forward = FeedForwardKind::kExperts,
        .router = RouterRule::kTopKSoftmax,
        .expert_biases = true,
    },
}};

// Architectures whose feed-forward is a mixture of experts of a kind grove does not run yet:
// refused by name, since "unsupported architecture" alone would leave a user guessing whether a
// conversion went wrong.
constexpr std::array<std::string_view, 7> kMixtureOfExperts = {
    "qwen2moe", "mixtral", "deepseek2", "olmoe", "granitemoe", "phimoe", "llama4"};

}  // namespace

std::span<const ModelFamily> ModelFamilies() { return kFamilies; }

std::string FamilyList() {
  std::string list;
  for (const ModelFamily& f : kFamilies) {
    if (!list.empty()) list += ", ";
    list += f.arch;
  }
  return list;
}

const ModelFamily& FindFamily(std::string_view arch) {
  for (const ModelFamily& f : kFamilies) {
    if (f.arch == arch) return f;
  }
  for (std::string_view moe : kMixtureOfExperts) {
    if (moe == arch) {
      Fail("model: architecture '", arch,
           "' is a mixture-of-experts model, which grove does not run (it runs ", FamilyList(),
           ")");
    }
  }
  Fail("model: unsupported architecture '", arch, "' (grove runs ", FamilyList(), ")");
}

}  // namespace grove
