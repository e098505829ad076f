// Tensor element types as numbered in GGUF files (the ggml_type enum). Block geometry of every type
// is a fact of the file format, so the reader can size and bounds-check tensors it cannot decode;
// which types grove computes with is decided in quant/.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace grove {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kMXFP4 = 39,
};

struct GgmlTypeTraits {
  std::string_view name;  // as llama.cpp prints it: "f32", "q8_0", ...
  int64_t block_size;     // elements per block
  int64_t type_size;      // bytes per block
};

// Traits of a known type, or nullopt for a number no GGUF writer uses.
std::optional<GgmlTypeTraits> GetGgmlTypeTraits(uint32_t type);
GgmlTypeTraits GgmlTraits(GgmlType type);  // type must be known
std::string_view GgmlTypeName(GgmlType type);
// Parses "q8_0", "F16", ... (case-insensitive); nullopt if unknown.
std::optional<GgmlType> ParseGgmlType(std::string_view name);

// Bytes of one row of n elements; n must be a multiple of the block size.
inline int64_t GgmlRowBytes(GgmlType type, int64_t n) {
  GgmlTypeTraits t = GgmlTraits(type);
  return n / t.block_size * t.type_size;
}

}  // namespace grove
