#include "quant/quant_mix.h"

#include <charconv>
#include <string_view>

namespace grove {
namespace {

// Layer index of "blk.N.…", or -1.
int LayerOf(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int layer = -1;
  const char* begin = name.data() + 4;
  auto [end, ec] = std::from_chars(begin, name.data() + name.size(), layer);
  return ec == std::errc() && end != begin && *end == '.' ? layer : -1;
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers, and every third in between.
bool UseMoreBits(int layer, int n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// The value projection of block `layer`, or its fused QKV (llama.cpp's rules for attn_v).
GgmlType AttentionValueType(QuantMix mix, GgmlType base, int layer, const MixModel& model) {
  switch (mix) {
    case QuantMix::kQ2_K:
      return model.n_gqa >= 4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
    case QuantMix::kQ3_K_M:
      return layer < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    case QuantMix::kQ3_K_L:
      return GgmlType::kQ5_K;
    case QuantMix::kIQ4:
      return model.n_gqa >= 4 ? GgmlType::kQ5_K : base;
    case QuantMix::kQ4_K_S:
      return layer < 4 ? GgmlType::kQ5_K : base;
    case QuantMix::kQ4_K_M:
    case QuantMix::kQ5_K_M:
      return UseMoreBits(layer, model.n_layer) ? GgmlType::kQ6_K : base;
    default:  // Q3_K_S, Q5_K_S
      return base;
  }
}

// The FFN's down projection of block `layer` (llama.cpp's rules for ffn_down).
GgmlType FfnDownType(QuantMix mix, GgmlType base, int layer, const MixModel& model) {
  const int n_layer = model.n_layer;
  switch (mix) {
    case QuantMix::kQ2_K:
      return GgmlType::kQ3_K;
    case QuantMix::kQ3_K_M:  // llama.cpp's Falcon exception does not apply to grove's families
      return layer < n_layer / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    case QuantMix::kQ3_K_L:
      return GgmlType::kQ5_K;
    case QuantMix::kQ4_K_S:
    case QuantMix::kIQ4:  // without an importance matrix, as grove always quantizes
      return layer < n_layer / 8 ? GgmlType::kQ5_K : base;
    case QuantMix::kQ4_K_M:
    case QuantMix::kQ5_K_M:
      return UseMoreBits(layer, n_layer) ? GgmlType::kQ6_K : base;
    default:  // Q3_K_S, Q5_K_S
      return base;
  }
}

}  // namespace

GgmlType MixTensorType(QuantMix mix, GgmlType base, const std::string& name, int64_t n_matrices,
                       const MixModel& model) {
  if (mix == QuantMix::kNone) return base;
  const bool output = name == "output.weight" || (!model.has_output && name == "token_embd.weight");
  // llama.cpp decides MXFP4_MOE before every other rule: the output Q8_0, then by shape alone.
  if (mix == QuantMix::kMXFP4_MoE) return !output && n_matrices > 1 ? base : GgmlType::kQ8_0;
  if (output) return GgmlType::kQ6_K;
  const int layer = LayerOf(name);
  if (layer < 0) return base;
  // llama.cpp counts a fused QKV (Phi-3) among the value projections, "more sensitive to
  // quantization" (category_is_attn_v), and gives it their rules.
  if (EndsWith(name, ".attn_v.weight") || EndsWith(name, ".attn_qkv.weight")) {
    return AttentionValueType(mix, base, layer, model);
  }
  // A mixture's experts' down projections are ffn_down to llama.cpp's rules (it matches the name
  // "ffn_down" anywhere); its rules for mixtures of 8 experts (Mixtral) are not applied yet.
  if (EndsWith(name, ".ffn_down.weight") || EndsWith(name, ".ffn_down_exps.weight")) {
    return FfnDownType(mix, base, layer, model);
  }
  if (EndsWith(name, ".attn_output.weight")) {
    if (mix == QuantMix::kQ2_K) return GgmlType::kQ3_K;
    if (mix == QuantMix::kQ3_K_M) return GgmlType::kQ4_K;
    if (mix == QuantMix::kQ3_K_L) return GgmlType::kQ5_K;
    return base;
  }
  return base;
}

GgmlType FallbackType(GgmlType wanted, int64_t row_length) {
  if (row_length % GgmlTraits(wanted).block_size == 0) return wanted;
  GgmlType type = GgmlType::kF16;
  switch (wanted) {
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
      type = GgmlType::kQ4_0;
      break;
    case GgmlType::kQ4_K:
      type = GgmlType::kQ5_0;
      break;
    case GgmlType::kQ5_K:
      type = GgmlType::kQ5_1;
      break;
    case GgmlType::kQ6_K:
      type = GgmlType::kQ8_0;
      break;
    case GgmlType::kIQ4_XS:
      type = GgmlType::kIQ4_NL;
      break;
    default:
      break;
  }
  if (row_length % GgmlTraits(type).block_size != 0) type = GgmlType::kF16;
  return type;
}

}  // namespace grove
