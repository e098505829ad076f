#include "quant/quant.h"

#include <cstring>

#include "base/error.h"
#include "quant/block32_quants.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/iq4_quants.h"
#include "quant/k_quants.h"
#include "quant/mxfp4_levels.h"
#include "quant/mxfp4_quants.h"

namespace grove {
namespace {

using DequantizeFn = void (*)(const void* src, float* dst, int64_t n_blocks);
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n_blocks);

// Adapts a typed block function to the table's untyped signature.
template <typename Block, void (*F)(const Block*, float*, int64_t)>
void Dequantize(const void* src, float* dst, int64_t n_blocks) {
  F(static_cast<const Block*>(src), dst, n_blocks);
}
template <typename Block, void (*F)(const float*, Block*, int64_t)>
void Quantize(const float* src, void* dst, int64_t n_blocks) {
  F(src, static_cast<Block*>(dst), n_blocks);
}

void DequantizeF32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void QuantizeF32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
// F16 and BF16: one 16-bit value per element, converted one by one.
template <float (*ToFloat)(uint16_t)>
void Dequantize16Bit(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = ToFloat(h[i]);
}
template <uint16_t (*FromFloat)(float)>
void Quantize16Bit(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = FromFloat(src[i]);
}

using FirstBadScaleFn = int64_t (*)(const void* src, int64_t n_blocks);

// An fp16 that is infinite or NaN: every exponent bit set.
bool NonFiniteHalf(uint16_t h) { return (h & 0x7C00u) == 0x7C00u; }

// The first block whose scale (d, and the min's scale where the type has one: m or dmin) is not
// finite; -1 when none is. Every block type keeps its scales as fp16 but MXFP4, whose E8M0
// exponent e is bad when it is E8M0's NaN.
template <typename Block>
int64_t FirstBadScale(const void* src, int64_t n_blocks) {
  const auto* blocks = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n_blocks; ++i) {
    const Block& b = blocks[i];
    bool bad = false;
    if constexpr (requires { b.e; }) bad |= b.e == kMxfp4BadExponent;
    if constexpr (requires { b.d; }) bad |= NonFiniteHalf(b.d);
    if constexpr (requires { b.m; }) bad |= NonFiniteHalf(b.m);
    if constexpr (requires { b.dmin; }) bad |= NonFiniteHalf(b.dmin);
    if (bad) return i;
  }
  return -1;
}

// What grove does with each type it reads: every one of them the kernels compute with as it is
// stored (kernels/kernel_set.h), and writes as ggml's quantizers do; `quantize` null where grove
// does not write it (none today).
struct WeightTypeRow {
  GgmlType type;
  DequantizeFn dequantize;
  QuantizeFn quantize;
  FirstBadScaleFn first_bad_scale = nullptr;  // null for the float types: no scales
};

const WeightTypeRow kWeightTypes[] = {
    {GgmlType::kF32, DequantizeF32, QuantizeF32},
    {GgmlType::kF16, Dequantize16Bit<Fp16ToFp32>, Quantize16Bit<Fp32ToFp16>},
    {GgmlType::kBF16, Dequantize16Bit<Bf16ToFp32>, Quantize16Bit<Fp32ToBf16>},
    {GgmlType::kQ8_0, Dequantize<BlockQ8_0, DequantizeRowQ8_0>,
     Quantize<BlockQ8_0, QuantizeRowQ8_0>, FirstBadScale<BlockQ8_0>},
    {GgmlType::kQ4_0, Dequantize<BlockQ4_0, DequantizeRowQ4_0>,
     Quantize<BlockQ4_0, QuantizeRowQ4_0>, FirstBadScale<BlockQ4_0>},
    {GgmlType::kQ4_1, Dequantize<BlockQ4_1, DequantizeRowQ4_1>,
     Quantize<BlockQ4_1, QuantizeRowQ4_1>, FirstBadScale<BlockQ4_1>},
    {GgmlType::kQ5_0, Dequantize<BlockQ5_0, DequantizeRowQ5_0>,
     Quantize<BlockQ5_0, QuantizeRowQ5_0>, FirstBadScale<BlockQ5_0>},
    {GgmlType::kQ5_1, Dequantize<BlockQ5_1, DequantizeRowQ5_1>,
     Quantize<BlockQ5_1, QuantizeRowQ5_1>, FirstBadScale<BlockQ5_1>},
    {GgmlType::kIQ4_NL, Dequantize<BlockIQ4_NL, DequantizeRowIQ4_NL>,
     Quantize<BlockIQ4_NL, QuantizeRowIQ4_NL>, FirstBadScale<BlockIQ4_NL>},
    {GgmlType::kMXFP4, Dequantize<BlockMXFP4, DequantizeRowMXFP4>,
     Quantize<BlockMXFP4, QuantizeRowMXFP4>, FirstBadScale<BlockMXFP4>},
    {GgmlType::kQ2_K, Dequantize<BlockQ2_K, DequantizeRowQ2_K>,
     Quantize<BlockQ2_K, QuantizeRowQ2_K>, FirstBadScale<BlockQ2_K>},
    {GgmlType::kQ3_K, Dequantize<BlockQ3_K, DequantizeRowQ3_K>,
     Quantize<BlockQ3_K, QuantizeRowQ3_K>, FirstBadScale<BlockQ3_K>},
    {GgmlType::kQ4_K, Dequantize<BlockQ4_K, DequantizeRowQ4_K>,
     Quantize<BlockQ4_K, QuantizeRowQ4_K>, FirstBadScale<BlockQ4_K>},
    {GgmlType::kQ5_K, Dequantize<BlockQ5_K, DequantizeRowQ5_K>,
     Quantize<BlockQ5_K, QuantizeRowQ5_K>, FirstBadScale<BlockQ5_K>},
    {GgmlType::kQ6_K, Dequantize<BlockQ6_K, DequantizeRowQ6_K>,
     Quantize<BlockQ6_K, QuantizeRowQ6_K>, FirstBadScale<BlockQ6_K>},
    {GgmlType::kIQ4_XS, Dequantize<BlockIQ4_XS, DequantizeRowIQ4_XS>,
     Quantize<BlockIQ4_XS, QuantizeRowIQ4_XS>, FirstBadScale<BlockIQ4_XS>},
};

const WeightTypeRow* Find(GgmlType type) {
  for (const WeightTypeRow& row : kWeightTypes) {
    if (row.type == type) return &row;
  }
  return nullptr;
}

// The row's table entry and its block count; throws for an unknown type or a ragged row.
const WeightTypeRow& Checked(GgmlType type, int64_t n, int64_t* n_blocks) {
  const WeightTypeRow* row = Find(type);
  if (!row) {
    Fail("quant: grove cannot read type ", GgmlTypeName(type), " (it computes with ",
         SupportedWeightTypeNames(), ")");
  }
  const int64_t block_size = GgmlTraits(type).block_size;
  if (n < 0 || n % block_size != 0) {
    Fail("quant: row of ", n, " elements is not a multiple of the ", GgmlTypeName(type),
         " block size ", block_size);
  }
  // The float types' functions take elements, the block types' blocks.
  *n_blocks = block_size == 1 ? n : n / block_size;
  return *row;
}

}  // namespace

bool CanDequantize(GgmlType type) { return Find(type) != nullptr; }

int64_t FirstNonFiniteScale(GgmlType type, const void* data, int64_t n) {
  int64_t n_blocks = 0;
  const WeightTypeRow& row = Checked(type, n, &n_blocks);
  return row.first_bad_scale ? row.first_bad_scale(data, n_blocks) : -1;
}

std::string_view BadScaleDescription(GgmlType type) {
  return type == GgmlType::kMXFP4 ? "an exponent of 0xFF (E8M0's NaN)" : "a NaN or infinite scale";
}

bool CanQuantize(GgmlType type) {
  const WeightTypeRow* row = Find(type);
  return row && row->quantize;
}

bool IsSupportedWeightType(GgmlType type) { return Find(type) != nullptr; }

std::string SupportedWeightTypeNames() {
  std::string names;
  for (const WeightTypeRow& row : kWeightTypes) {
    if (!names.empty()) names += ", ";
    names += GgmlTypeName(row.type);
  }
  return names;
}

void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  int64_t n_blocks;
  Checked(type, n, &n_blocks).dequantize(src, dst, n_blocks);
}

void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n) {
  int64_t n_blocks;
  const WeightTypeRow& row = Checked(type, n, &n_blocks);
  if (!row.quantize) Fail("quant: grove does not write ", GgmlTypeName(type), " yet");
  row.quantize(src, dst, n_blocks);
}

}  // namespace grove
