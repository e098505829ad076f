// Scalar reference kernels: the plain definition of every operation, used on CPUs without AVX2, as
// the reference the SIMD levels are tested against, and as documentation of what they compute.
//
// Each output is one sequential float accumulation over k (per block for the integer types), so it
// is trivially independent of how many rows are computed together. Compiled with -ffp-contract=off
// so that no compiler fuses a multiply-add differently in different inlined copies.
#include <cmath>
#include <cstdint>

#include "kernels/kernel_tables.h"
#include "quant/blocks.h"
#include "quant/half.h"

namespace grove {
namespace {

// ActQ8 layout of this level: quants are signed bytes, then one float scale per block.
const float* ActScales(const uint8_t* act_row, int64_t n_in) {
  return reinterpret_cast<const float*>(act_row + ActQ8ScaleOffset(n_in));
}

void QuantizeAct(const float* x, int64_t n_in, void* act_row) {
  auto* qs = static_cast<int8_t*>(act_row);
  auto* scales = reinterpret_cast<float*>(static_cast<uint8_t*>(act_row) + ActQ8ScaleOffset(n_in));
  for (int64_t b = 0; b < n_in / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;
    float amax = 0.0f;
    for (int j = 0; j < kQBlock; ++j) {
      const float v = std::fabs(xb[j]);
      amax = amax > v ? amax : v;
    }
    // The same arithmetic as quant.cc's Q8_0 quantizer, except that the scale stays a float.
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    scales[b] = d;
    for (int j = 0; j < kQBlock; ++j)
      qs[b * kQBlock + j] = static_cast<int8_t>(std::round(xb[j] * id));
  }
}

void DotF32(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
            int64_t y_stride) {
  const auto* w = static_cast<const float*>(w_row);
  for (int i = 0; i < n_x; ++i) {
    const auto* xr = reinterpret_cast<const float*>(static_cast<const uint8_t*>(x) + i * x_stride);
    float acc = 0.0f;
    for (int64_t k = 0; k < n_in; ++k) acc += w[k] * xr[k];
    y[i * y_stride] = acc;
  }
}

template <bool kBf16>
void DotHalf(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  const auto* w = static_cast<const uint16_t*>(w_row);
  for (int i = 0; i < n_x; ++i) {
    const auto* xr = reinterpret_cast<const float*>(static_cast<const uint8_t*>(x) + i * x_stride);
    float acc = 0.0f;
    for (int64_t k = 0; k < n_in; ++k) {
      acc += (kBf16 ? Bf16ToFp32(w[k]) : Fp16ToFp32(w[k])) * xr[k];
    }
    y[i * y_stride] = acc;
  }
}

// Integer dot of one weight block with one activation block (exact in int32), then one float
// multiply-add per block: sum_b (d_w * d_x) * sumi_b.
void DotQ8_0(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  const auto* w = static_cast<const BlockQ8_0*>(w_row);
  const int64_t n_blocks = n_in / kQBlock;
  for (int i = 0; i < n_x; ++i) {
    const uint8_t* act = static_cast<const uint8_t*>(x) + i * x_stride;
    const auto* xq = reinterpret_cast<const int8_t*>(act);
    const float* xd = ActScales(act, n_in);
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; ++b) {
      int32_t sumi = 0;
      for (int j = 0; j < kQBlock; ++j) sumi += w[b].qs[j] * xq[b * kQBlock + j];
      acc += (Fp16ToFp32(w[b].d) * xd[b]) * static_cast<float>(sumi);
    }
    y[i * y_stride] = acc;
  }
}

void DotQ4_0(const void* w_row, int64_t n_in, const void* x, int64_t x_stride, int n_x, float* y,
             int64_t y_stride) {
  const auto* w = static_cast<const BlockQ4_0*>(w_row);
  const int64_t n_blocks = n_in / kQBlock;
  constexpr int kHalf = kQBlock / 2;
  for (int i = 0; i < n_x; ++i) {
    const uint8_t* act = static_cast<const uint8_t*>(x) + i * x_stride;
    const auto* xq = reinterpret_cast<const int8_t*>(act);
    const float* xd = ActScales(act, n_in);
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int8_t* xb = xq + b * kQBlock;
      int32_t sumi = 0;
      for (int j = 0; j < kHalf; ++j) {
        sumi += ((w[b].qs[j] & 0x0f) - 8) * xb[j];
        sumi += ((w[b].qs[j] >> 4) - 8) * xb[j + kHalf];
      }
      acc += (Fp16ToFp32(w[b].d) * xd[b]) * static_cast<float>(sumi);
    }
    y[i * y_stride] = acc;
  }
}

}  // namespace

extern const KernelSet kScalarKernels = {
    .level = KernelLevel::kScalar,
    .name = "scalar",
    .act_q8_unsigned = false,
    .quantize_act = &QuantizeAct,
    .dot_f32 = &DotF32,
    .dot_f16 = &DotHalf<false>,
    .dot_bf16 = &DotHalf<true>,
    .dot_q8_0 = &DotQ8_0,
    .dot_q4_0 = &DotQ4_0,
};

}  // namespace grove
