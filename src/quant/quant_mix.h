// The type each matrix of a model gets under llama.cpp's quantization presets (the mixes
// llama-quantize writes: llama_tensor_get_type and tensor_type_fallback in llama-quant.cpp), for
// the presets grove writes, so that `grove quantize IN OUT q4_k_m` stores what llama-quantize
// stores.
#pragma once

#include <cstdint>
#include <string>

#include "io/ggml_type.h"

namespace grove {

enum class QuantMix {
  kNone,       // every matrix in the base type
  kQ2_K,       // LLAMA_FTYPE_MOSTLY_Q2_K
  kQ3_K_S,     // LLAMA_FTYPE_MOSTLY_Q3_K_S
  kQ3_K_M,     // LLAMA_FTYPE_MOSTLY_Q3_K_M
  kQ3_K_L,     // LLAMA_FTYPE_MOSTLY_Q3_K_L
  kQ4_K_S,     // LLAMA_FTYPE_MOSTLY_Q4_K_S
  kQ4_K_M,     // LLAMA_FTYPE_MOSTLY_Q4_K_M
  kQ5_K_S,     // LLAMA_FTYPE_MOSTLY_Q5_K_S
  kQ5_K_M,     // LLAMA_FTYPE_MOSTLY_Q5_K_M
  kIQ4,        // LLAMA_FTYPE_MOSTLY_IQ4_NL and _IQ4_XS (the same rules; no importance matrix)
  kMXFP4_MoE,  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE: a mixture's experts MXFP4, every other matrix Q8_0
};

// What the rules read of the model.
struct MixModel {
  int n_layer = 0;
  bool has_output = true;  // false: the token embedding doubles as the output matrix
  int n_gqa = 1;           // query heads per key/value head
};

// The type of the matrix `name` ("blk.N.attn_v.weight", "output.weight", ...) under `mix` with
// base type `base`, before any fallback for rows that do not fit the type's blocks. n_matrices is
// the tensor's third dimension (n_expert for a mixture's experts, else 1), by which MXFP4_MOE
// tells experts from the rest. llama.cpp counts attn_v and ffn_down matrices in file order; grove
// takes the layer number from the name, which is the same for every family grove runs (one of
// each per layer).
GgmlType MixTensorType(QuantMix mix, GgmlType base, const std::string& name, int64_t n_matrices,
                       const MixModel& model);

// The type a matrix of `wanted` is stored in when its rows (row_length elements) do not divide into
// its blocks, as llama.cpp chooses it: a 256-element type falls back to the 32-element type of
// about its size (Q2_K, Q3_K: Q4_0; Q4_K: Q5_0; Q5_K: Q5_1; Q6_K: Q8_0; IQ4_XS: IQ4_NL), and what
// still does not fit, to F16. Returns `wanted` when it fits.
GgmlType FallbackType(GgmlType wanted, int64_t row_length);

}  // namespace grove
