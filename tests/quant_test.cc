// Weight formats: fp16/bf16 conversion bit patterns, GGUF block layouts, quantizers against ggml's
// reference algorithm, and round-trip error bounds per type.
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "kernels/cpu_features.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/k_quants.h"
#include "quant/quant.h"
#include "quant/quant_mix.h"

namespace grove {
namespace {

float FromBits(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t ToBits(float f) { return std::bit_cast<uint32_t>(f); }

// ---- fp16

TEST(HalfTest, Fp16KnownValues) {
  EXPECT_EQ(Fp32ToFp16(0.0f), 0x0000);
  EXPECT_EQ(Fp32ToFp16(-0.0f), 0x8000);
  EXPECT_EQ(Fp32ToFp16(1.0f), 0x3c00);
  EXPECT_EQ(Fp32ToFp16(-2.0f), 0xc000);
  EXPECT_EQ(Fp32ToFp16(0.1f), 0x2e66);
  EXPECT_EQ(Fp32ToFp16(65504.0f), 0x7bff);  // largest finite half
  EXPECT_EQ(Fp32ToFp16(65519.99f), 0x7bff);
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7c00);  // tie between 65504 (odd) and 2^16: up, to inf
  EXPECT_EQ(Fp32ToFp16(1e10f), 0x7c00);
  EXPECT_EQ(Fp32ToFp16(-1e10f), 0xfc00);
  EXPECT_EQ(Fp32ToFp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(Fp32ToFp16(-std::numeric_limits<float>::infinity()), 0xfc00);
}

TEST(HalfTest, Fp16RoundsTiesToEven) {
  EXPECT_EQ(Fp32ToFp16(1.0f + 0x1p-11f), 0x3c00);      // halfway 1 .. 1+2^-10: even is 1
  EXPECT_EQ(Fp32ToFp16(1.0f + 3 * 0x1p-11f), 0x3c02);  // halfway 1+2^-10 .. 1+2^-9: even up
  EXPECT_EQ(Fp32ToFp16(FromBits(ToBits(1.0f + 0x1p-11f) + 1)), 0x3c01);  // just above the tie
  EXPECT_EQ(Fp32ToFp16(FromBits(ToBits(1.0f + 0x1p-11f) - 1)), 0x3c00);  // just below
  EXPECT_EQ(Fp32ToFp16(2047.0f + 0.5f), 0x6800);  // 2047.5 -> 2048 (carry into exponent)
}

TEST(HalfTest, Fp16Subnormals) {
  EXPECT_EQ(Fp32ToFp16(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(Fp32ToFp16(0x1p-25f), 0x0000);  // tie with zero: even
  EXPECT_EQ(Fp32ToFp16(FromBits(ToBits(0x1p-25f) + 1)), 0x0001);
  EXPECT_EQ(Fp32ToFp16(-0x1p-26f), 0x8000);
  EXPECT_EQ(Fp32ToFp16(3 * 0x1p-25f), 0x0002);        // 1.5 ulp: tie, even is 2
  EXPECT_EQ(Fp32ToFp16(5 * 0x1p-25f), 0x0002);        // 2.5 ulp: tie, even is 2
  EXPECT_EQ(Fp32ToFp16(1023 * 0x1p-24f), 0x03ff);     // largest subnormal
  EXPECT_EQ(Fp32ToFp16(1023.5f * 0x1p-24f), 0x0400);  // tie, rounds up into the min normal
  EXPECT_EQ(Fp32ToFp16(0x1p-14f), 0x0400);            // smallest normal
  EXPECT_EQ(Fp32ToFp16(1e-30f), 0x0000);
  EXPECT_EQ(Fp16ToFp32(0x0001), 0x1p-24f);
  EXPECT_EQ(Fp16ToFp32(0x83ff), -1023 * 0x1p-24f);
  EXPECT_EQ(Fp16ToFp32(0x0400), 0x1p-14f);
}

TEST(HalfTest, Fp16NanStaysQuietNan) {
  const uint16_t h = Fp32ToFp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(h & 0x7c00, 0x7c00);
  EXPECT_NE(h & 0x03ff, 0);
  EXPECT_EQ(Fp32ToFp16(FromBits(0x7f800001)), 0x7e00);  // signalling NaN: quiet bit forced
  EXPECT_EQ(Fp32ToFp16(FromBits(0xffc00000)), 0xfe00);
  EXPECT_TRUE(std::isnan(Fp16ToFp32(0x7e00)));
  EXPECT_TRUE(std::isnan(Fp16ToFp32(0x7c01)));
  EXPECT_EQ(Fp16ToFp32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Fp16ToFp32(0xfc00), -std::numeric_limits<float>::infinity());
}

TEST(HalfTest, Fp16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      // Payload kept, quiet bit set.
      EXPECT_EQ(Fp32ToFp16(f), h | 0x0200) << h;
    } else {
      EXPECT_EQ(Fp32ToFp16(f), h) << h;
    }
  }
}

// The F16C instructions round to nearest even too: agreement on many bit patterns (every half's
// float value and its neighbours, plus random floats) checks the portable code against hardware.
__attribute__((target("f16c"))) uint16_t HardwareFp32ToFp16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float HardwareFp16ToFp32(uint16_t h) { return _cvtsh_ss(h); }

TEST(HalfTest, Fp16MatchesF16cHardware) {
  if (!HostCpuFeatures().f16c) GTEST_SKIP() << "no F16C on this CPU";
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    const float hw = HardwareFp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(hw));
      continue;
    }
    ASSERT_EQ(ToBits(f), ToBits(hw)) << h;
    // The value, its float neighbours, and the midpoints to the next half.
    for (int32_t delta : {-2, -1, 0, 1, 2}) {
      const float g = FromBits(ToBits(f) + delta);
      ASSERT_EQ(Fp32ToFp16(g), HardwareFp32ToFp16(g)) << std::hexfloat << g;
    }
    const float next = Fp16ToFp32(static_cast<uint16_t>(h + 1));
    if ((h & 0x7fff) < 0x7bff && !std::isnan(next)) {
      const float mid = f + (next - f) / 2;  // exact: a half midpoint has at most 12 bits
      for (int32_t delta : {-1, 0, 1}) {
        const float g = FromBits(ToBits(mid) + delta);
        ASSERT_EQ(Fp32ToFp16(g), HardwareFp32ToFp16(g)) << std::hexfloat << g;
      }
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 2'000'000; ++i) {
    const float g = FromBits(static_cast<uint32_t>(rng()));
    ASSERT_EQ(Fp32ToFp16(g), HardwareFp32ToFp16(g)) << std::hexfloat << g;
  }
}

// ---- bf16

TEST(HalfTest, Bf16KnownValues) {
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Fp32ToBf16(-1.0f), 0xbf80);
  EXPECT_EQ(Fp32ToBf16(FromBits(0x3f808000)), 0x3f80);  // tie, even down
  EXPECT_EQ(Fp32ToBf16(FromBits(0x3f818000)), 0x3f82);  // tie, even up
  EXPECT_EQ(Fp32ToBf16(FromBits(0x3f808001)), 0x3f81);  // above the tie
  EXPECT_EQ(Fp32ToBf16(FromBits(0x3f807fff)), 0x3f80);  // below the tie
  EXPECT_EQ(Fp32ToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(Fp32ToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(Fp32ToBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_EQ(Fp32ToBf16(FromBits(0x7f800001)), 0x7fc0);               // signalling NaN made quiet
  EXPECT_EQ(Fp32ToBf16(FromBits(0xffc00000)), 0xffc0);
  EXPECT_EQ(Fp32ToBf16(FromBits(0x7fff0000)), 0x7fff);  // NaN payload kept
  // Subnormals are rounded, not flushed (as ggml does since it dropped the flush).
  EXPECT_EQ(Fp32ToBf16(FromBits(0x00000001)), 0x0000);
  EXPECT_EQ(Fp32ToBf16(FromBits(0x00008000)), 0x0000);  // tie, even
  EXPECT_EQ(Fp32ToBf16(FromBits(0x00018000)), 0x0002);  // tie, even
  EXPECT_EQ(Fp32ToBf16(FromBits(0x00010001)), 0x0001);
  EXPECT_EQ(Fp32ToBf16(FromBits(0x80010000)), 0x8001);
  EXPECT_EQ(ToBits(Bf16ToFp32(0x3f81)), 0x3f810000u);
  EXPECT_EQ(ToBits(Bf16ToFp32(0x8001)), 0x80010000u);
  EXPECT_TRUE(std::isnan(Bf16ToFp32(0x7fc0)));
}

TEST(HalfTest, Bf16RoundTripsEveryBf16) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Bf16ToFp32(static_cast<uint16_t>(h));
    EXPECT_EQ(Fp32ToBf16(f), std::isnan(f) ? (h | 0x40) : h) << h;
  }
}

// ---- Block layouts

TEST(BlockTest, Q4_0NibbleLayout) {
  BlockQ4_0 block;
  block.d = 0x3c00;  // 1.0
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float out[32];
  DequantizeRow(GgmlType::kQ4_0, &block, out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], j - 8) << j;       // low nibble of qs[j]: element j
    EXPECT_EQ(out[j + 16], 7 - j) << j;  // high nibble of qs[j]: element j + 16
  }
}

TEST(BlockTest, Q8_0Layout) {
  uint8_t bytes[2 * sizeof(BlockQ8_0)];
  for (int b = 0; b < 2; ++b) {
    uint8_t* p = bytes + b * 34;
    const uint16_t d = b == 0 ? 0x3800 : 0xc000;  // 0.5, -2
    std::memcpy(p, &d, 2);                        // little-endian fp16 first, then 32 int8
    for (int j = 0; j < 32; ++j) p[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  }
  float out[64];
  DequantizeRow(GgmlType::kQ8_0, bytes, out, 64);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(out[j], 0.5f * (j - 16));
    EXPECT_EQ(out[32 + j], -2.0f * (j - 16));
  }
}

// ---- Quantizers against ggml's reference algorithm

// ggml's quantize_row_q8_0_ref, transcribed.
std::vector<BlockQ8_0> ReferenceQ8_0(const std::vector<float>& x) {
  std::vector<BlockQ8_0> out(x.size() / 32);
  for (size_t i = 0; i < out.size(); ++i) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float v = fabsf(x[i * 32 + j]);
      amax = amax > v ? amax : v;  // MAX(amax, fabsf(v))
    }
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    out[i].d = Fp32ToFp16(d);
    for (int j = 0; j < 32; ++j) out[i].qs[j] = static_cast<int8_t>(roundf(x[i * 32 + j] * id));
  }
  return out;
}

// ggml's quantize_row_q4_0_ref, transcribed.
std::vector<BlockQ4_0> ReferenceQ4_0(const std::vector<float>& x) {
  std::vector<BlockQ4_0> out(x.size() / 32);
  for (size_t i = 0; i < out.size(); ++i) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float v = x[i * 32 + j];
      if (amax < fabsf(v)) {
        amax = fabsf(v);
        max = v;
      }
    }
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    out[i].d = Fp32ToFp16(d);
    for (int j = 0; j < 16; ++j) {
      const float x0 = x[i * 32 + j] * id;
      const float x1 = x[i * 32 + 16 + j] * id;
      const uint8_t xi0 = std::min<int8_t>(15, static_cast<int8_t>(x0 + 8.5f));
      const uint8_t xi1 = std::min<int8_t>(15, static_cast<int8_t>(x1 + 8.5f));
      out[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
  return out;
}

// Values with the awkward cases a quantizer meets: mixed scales, an all-zero block, exact ties
// (x / d = k + 0.5), a block whose largest value is negative and one where it is positive.
std::vector<float> AwkwardValues(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = normal(rng) * (1.0f + static_cast<float>(i % 7));
  if (n >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
  if (n >= 96) {
    for (int j = 0; j < 32; ++j) x[64 + j] = static_cast<float>(j - 16) * 0.5f + 0.25f;
  }
  if (n >= 160) {
    x[100] = -50.0f;
    x[140] = 50.0f;
  }
  return x;
}

constexpr int64_t kSizes[] = {32, 64, 96, 160, 4096, 4128};

TEST(QuantizeTest, Q8_0MatchesGgmlReference) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = AwkwardValues(n, static_cast<uint32_t>(n));
    std::vector<BlockQ8_0> got(n / 32);
    QuantizeRow(GgmlType::kQ8_0, x.data(), got.data(), n);
    const std::vector<BlockQ8_0> want = ReferenceQ8_0(x);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(BlockQ8_0)), 0) << n;
  }
}

TEST(QuantizeTest, Q4_0MatchesGgmlReference) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = AwkwardValues(n, static_cast<uint32_t>(n) + 1);
    std::vector<BlockQ4_0> got(n / 32);
    QuantizeRow(GgmlType::kQ4_0, x.data(), got.data(), n);
    const std::vector<BlockQ4_0> want = ReferenceQ4_0(x);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(BlockQ4_0)), 0) << n;
  }
}

TEST(QuantizeTest, KnownBlocks) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  // Q4_0: the largest magnitude is -16, so d = -16 / -8 = 2 and q = trunc(x / 2 + 8.5), capped
  // at 15.
  BlockQ4_0 q4;
  QuantizeRow(GgmlType::kQ4_0, x.data(), &q4, 32);
  EXPECT_EQ(q4.d, 0x4000);
  for (int j = 0; j < 16; ++j) {
    const int lo = (j + 1) / 2;                     // element j:      trunc(j/2 + 0.5)
    const int hi = std::min(15, (j + 16 + 1) / 2);  // element j + 16
    EXPECT_EQ(q4.qs[j], lo | (hi << 4)) << j;
  }
  // Q8_0: d = 16 / 127, q = round(x * 127 / 16), ties away from zero.
  BlockQ8_0 q8;
  QuantizeRow(GgmlType::kQ8_0, x.data(), &q8, 32);
  EXPECT_EQ(q8.d, Fp32ToFp16(16.0f / 127.0f));
  EXPECT_EQ(q8.qs[0], -127);
  EXPECT_EQ(q8.qs[16], 0);
  EXPECT_EQ(q8.qs[31], static_cast<int8_t>(std::round(15.0f * (1.0f / (16.0f / 127.0f)))));
  // All zeros: d = 0 and every quant 0 (no division by zero).
  std::vector<float> zeros(32, 0.0f);
  QuantizeRow(GgmlType::kQ8_0, zeros.data(), &q8, 32);
  EXPECT_EQ(q8.d, 0);
  for (int8_t q : q8.qs) EXPECT_EQ(q, 0);
  QuantizeRow(GgmlType::kQ4_0, zeros.data(), &q4, 32);
  EXPECT_EQ(q4.d, 0x8000);  // 0 / -8 = -0, as in ggml
  for (uint8_t q : q4.qs) EXPECT_EQ(q, 0x88);
}

// ---- Round trips with explicit bounds

std::vector<float> RoundTrip(GgmlType type, const std::vector<float>& x) {
  std::vector<uint8_t> bytes(GgmlRowBytes(type, static_cast<int64_t>(x.size())));
  QuantizeRow(type, x.data(), bytes.data(), static_cast<int64_t>(x.size()));
  std::vector<float> y(x.size());
  DequantizeRow(type, bytes.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

TEST(RoundTripTest, F32IsExact) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = AwkwardValues(n, 11);
    EXPECT_EQ(RoundTrip(GgmlType::kF32, x), x);
  }
}

TEST(RoundTripTest, F16WithinHalfUlp) {
  for (int64_t n : kSizes) {
    std::vector<float> x = AwkwardValues(n, 12);
    x[0] = 3e-6f;  // a subnormal half: absolute error up to half of 2^-24
    const std::vector<float> y = RoundTrip(GgmlType::kF16, x);
    for (int64_t i = 0; i < n; ++i) {
      const double bound = std::max(std::fabs(x[i]) * 0x1p-11, 0x1p-25);
      EXPECT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), bound) << n << " " << i;
    }
  }
}

TEST(RoundTripTest, Bf16WithinHalfUlp) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = AwkwardValues(n, 13);
    const std::vector<float> y = RoundTrip(GgmlType::kBF16, x);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), std::fabs(x[i]) * 0x1p-8) << i;
    }
  }
}

// Per block, with d = amax / 127: |x - q * fp16(d)| <= d / 2 (rounding to the nearest quant, plus
// the float error of x * (1/d), at most 3e-5 d) + 127 * |fp16(d) - d| (at most 127 * d * 2^-11).
TEST(RoundTripTest, Q8_0WithinHalfStep) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = AwkwardValues(n, 14);
    const std::vector<float> y = RoundTrip(GgmlType::kQ8_0, x);
    for (int64_t b = 0; b < n / 32; ++b) {
      double amax = 0;
      for (int j = 0; j < 32; ++j)
        amax = std::max(amax, std::fabs(static_cast<double>(x[b * 32 + j])));
      const double d = amax / 127;
      const double bound = d * (0.5 + 3e-5 + 127 * 0x1p-11);
      for (int j = 0; j < 32; ++j) {
        const int64_t i = b * 32 + j;
        EXPECT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), bound) << n << " " << i;
      }
    }
  }
}

// Per block, with |d| = amax / 8: values are rounded to the nearest of 16 steps, so the error is
// at most |d| / 2, except that x / d in [7.5, 8] (the values opposite in sign to the extreme one)
// is capped at 7 steps: error up to |d|. Plus 8 * |fp16(d) - d| from the stored scale.
TEST(RoundTripTest, Q4_0WithinHalfStep) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = AwkwardValues(n, 15);
    const std::vector<float> y = RoundTrip(GgmlType::kQ4_0, x);
    for (int64_t b = 0; b < n / 32; ++b) {
      double amax = 0, max = 0;
      for (int j = 0; j < 32; ++j) {
        const double v = x[b * 32 + j];
        if (amax < std::fabs(v)) {
          amax = std::fabs(v);
          max = v;
        }
      }
      const double d = max / -8;
      for (int j = 0; j < 32; ++j) {
        const int64_t i = b * 32 + j;
        const double steps = d != 0 ? x[i] / d : 0;
        const double bound = std::fabs(d) * ((steps > 7.5 - 1e-4 ? 1.0 : 0.5) + 1e-5 + 8 * 0x1p-11);
        EXPECT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), bound) << n << " " << i;
      }
    }
  }
}

// ---- k-quants (Q4_K, Q6_K)

// Q4_K block built byte by byte as GGUF stores it: d, dmin (fp16), 12 bytes of packed 6-bit
// scales/mins, 128 bytes of nibbles. Scales and mins above 15 exercise the split high bits.
TEST(KQuantBlockTest, Q4_KLayout) {
  const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
  const int m[8] = {0, 5, 10, 63, 16, 31, 47, 8};
  // Packed by hand: bytes 0-3 = sc[0..3] | (sc[4..7] >> 4) << 6, bytes 4-7 = m[0..3] | (m[4..7] >>
  // 4)
  // << 6, bytes 8-11 = (sc[4..7] & 15) | (m[4..7] & 15) << 4.
  const uint8_t packed[12] = {0x41, 0x82, 0xC3, 0xC4, 0x40, 0x45,
                              0x8A, 0x3F, 0x01, 0xF1, 0xF2, 0x8F};
  uint8_t bytes[144];
  const uint16_t d = 0x3c00, dmin = 0x3800;  // 1.0, 0.5
  std::memcpy(bytes, &d, 2);
  std::memcpy(bytes + 2, &dmin, 2);
  std::memcpy(bytes + 4, packed, 12);
  for (int i = 0; i < 128; ++i) {
    bytes[16 + i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  }
  float out[256];
  DequantizeRow(GgmlType::kQ4_K, bytes, out, 256);
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) {
      // Element 64g + l: low nibble of qs[32g + l], sub-block 2g; 64g + 32 + l: high nibble, 2g
      // + 1.
      EXPECT_EQ(out[64 * g + l], sc[2 * g] * (l % 16) - 0.5f * m[2 * g]) << g << " " << l;
      EXPECT_EQ(out[64 * g + 32 + l], sc[2 * g + 1] * (15 - l % 16) - 0.5f * m[2 * g + 1])
          << g << " " << l;
    }
  }
  int got_sc, got_m;
  for (int j = 0; j < 8; ++j) {
    UnpackQ4_KScaleMin(packed, j, &got_sc, &got_m);
    EXPECT_EQ(got_sc, sc[j]) << j;
    EXPECT_EQ(got_m, m[j]) << j;
  }
}

// Q6_K block built byte by byte: ql[128], qh[64], int8 scales[16], fp16 d at byte 208.
TEST(KQuantBlockTest, Q6_KLayout) {
  auto quant = [](int e) { return (e * 7 + 3) % 64; };  // the 6-bit value of element e
  uint8_t bytes[210] = {};
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, c = (e % 128) / 32, l = e % 32;
    // Low 4 bits: byte 64h + l (c even) or 64h + 32 + l (c odd); low nibble for c < 2.
    bytes[64 * h + 32 * (c % 2) + l] |= static_cast<uint8_t>((quant(e) & 15) << (c < 2 ? 0 : 4));
    // High 2 bits: byte 128 + 32h + l, bits 2c and 2c + 1.
    bytes[128 + 32 * h + l] |= static_cast<uint8_t>((quant(e) >> 4) << (2 * c));
  }
  for (int k = 0; k < 16; ++k)
    bytes[192 + k] = static_cast<uint8_t>(static_cast<int8_t>(k * 9 - 70));
  const uint16_t d = 0x3400;  // 0.25
  std::memcpy(bytes + 208, &d, 2);
  float out[256];
  DequantizeRow(GgmlType::kQ6_K, bytes, out, 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(out[e], 0.25f * ((e / 16) * 9 - 70) * (quant(e) - 32)) << e;
  }
}

// Inputs whose bits do not depend on the standard library (an LCG, exact float arithmetic): zero
// sub-blocks, outliers, and all-positive super-blocks.
std::vector<float> GoldenInput(int64_t n, uint32_t seed) {
  std::vector<float> x(n);
  uint32_t s = seed;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    const int v = static_cast<int>(s >> 9) % 2001 - 1000;
    float f = static_cast<float>(v) / 256.0f * static_cast<float>(1 + i % 5);
    if (i % 61 == 0) f *= 12.0f;
    if ((i / 32) % 9 == 4) f = 0.0f;
    if ((i / 256) % 3 == 2) f = std::fabs(f);
    x[i] = f;
  }
  return x;
}

uint64_t Fnv1a(const std::vector<uint8_t>& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 1099511628211ull;
  }
  return h;
}

// The hashes are those of ggml's quantize_row_q4_K_ref / quantize_row_q6_K_ref (ggml-org/ggml,
// src/ggml-quants.c, built with -O2 -DNDEBUG -ffp-contract=off) on the same 12 super-blocks, so
// this fails if grove's quantizers drift from ggml's by a single bit. (ggml built with FMA
// contraction, e.g. -march=native under GCC, rounds differently in some blocks itself.)
TEST(KQuantizeTest, MatchesGgmlReferenceBytes) {
  constexpr int64_t kN = 256 * 12;
  const uint64_t want_q4_k[3] = {0x8d1aab0c30c7a9d8ull, 0x58f182eca2bada46ull,
                                 0xb45211d6e6770872ull};
  const uint64_t want_q6_k[3] = {0x9b404574990b9de5ull, 0xb9a181f03790c12bull,
                                 0x14015f8eec143aa0ull};
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const std::vector<float> x = GoldenInput(kN, seed);
    std::vector<uint8_t> q4(GgmlRowBytes(GgmlType::kQ4_K, kN));
    QuantizeRow(GgmlType::kQ4_K, x.data(), q4.data(), kN);
    EXPECT_EQ(Fnv1a(q4), want_q4_k[seed - 1]) << "q4_k seed " << seed;
    std::vector<uint8_t> q6(GgmlRowBytes(GgmlType::kQ6_K, kN));
    QuantizeRow(GgmlType::kQ6_K, x.data(), q6.data(), kN);
    EXPECT_EQ(Fnv1a(q6), want_q6_k[seed - 1]) << "q6_k seed " << seed;
  }
}

TEST(KQuantizeTest, ZeroAndConstantBlocks) {
  std::vector<float> zeros(256, 0.0f);
  BlockQ6_K q6;
  std::memset(&q6, 0xAB, sizeof(q6));
  QuantizeRow(GgmlType::kQ6_K, zeros.data(), &q6, 256);
  const std::vector<uint8_t> q6_bytes(reinterpret_cast<uint8_t*>(&q6),
                                      reinterpret_cast<uint8_t*>(&q6) + sizeof(q6));
  EXPECT_EQ(q6_bytes, std::vector<uint8_t>(sizeof(q6), 0));  // whole block zeroed, as ggml
  BlockQ4_K q4;
  QuantizeRow(GgmlType::kQ4_K, zeros.data(), &q4, 256);
  EXPECT_EQ(q4.d, 0);
  EXPECT_EQ(q4.dmin, 0);
  std::vector<float> y(256, 1.0f);
  DequantizeRow(GgmlType::kQ4_K, &q4, y.data(), 256);
  for (float v : y) EXPECT_EQ(v, 0.0f);
  // A constant positive block: min clamps to 0 and the value is one scale step.
  std::vector<float> c(256, 0.75f);
  QuantizeRow(GgmlType::kQ4_K, c.data(), &q4, 256);
  DequantizeRow(GgmlType::kQ4_K, &q4, y.data(), 256);
  for (float v : y) EXPECT_NEAR(v, 0.75f, 0.75f * 1e-3f);
}

// Per element: where the stored step and offset put x inside the grid (not clamped), the error is
// at most half a step, plus the float error of one multiply and subtract (2^-22 relative to the
// magnitudes involved). Clamped elements (possible after the 6-bit rounding of scales) must be
// rare. Over Gaussian rows, the relative RMS error is bounded by what 4 and 6 bits give (measured
// 0.08-0.09 for Q4_K and about 0.02 for Q6_K; the bounds leave a margin).
struct KQuantErrors {
  int64_t clamped = 0;
  double sum_err2 = 0, sum_x2 = 0;
};

TEST(KQuantRoundTripTest, Q4_KWithinHalfStep) {
  KQuantErrors e;
  for (int64_t n : {256, 512, 4096}) {
    const std::vector<float> x = AwkwardValues(n, static_cast<uint32_t>(n) + 20);
    const std::vector<float> y = RoundTrip(GgmlType::kQ4_K, x);
    std::vector<BlockQ4_K> blocks(n / 256);
    QuantizeRow(GgmlType::kQ4_K, x.data(), blocks.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const BlockQ4_K& b = blocks[i / 256];
      int sc, m;
      UnpackQ4_KScaleMin(b.scales, static_cast<int>(i % 256 / 32), &sc, &m);
      const double step = double{Fp16ToFp32(b.d)} * sc;
      const double offset = double{Fp16ToFp32(b.dmin)} * m;
      const double err = std::fabs(double{y[i]} - x[i]);
      e.sum_err2 += err * err;
      e.sum_x2 += double{x[i]} * x[i];
      if (step == 0) {  // here only the all-zero sub-block of AwkwardValues: exact
        EXPECT_EQ(err, 0) << n << " " << i;
        continue;
      }
      const double level = (x[i] + offset) / step;
      if (level < -0.5 || level > 15.5) {
        ++e.clamped;
        continue;
      }
      EXPECT_LE(err, step * 0.5 * (1 + 1e-5) + (15 * step + offset) * 0x1p-22) << n << " " << i;
    }
  }
  EXPECT_LE(e.clamped, (256 + 512 + 4096) / 100);
  EXPECT_LE(std::sqrt(e.sum_err2 / e.sum_x2), 0.12);
  std::printf("q4_k: %lld clamped, relative rms error %.4f\n", static_cast<long long>(e.clamped),
              std::sqrt(e.sum_err2 / e.sum_x2));
}

TEST(KQuantRoundTripTest, Q6_KWithinHalfStep) {
  KQuantErrors e;
  for (int64_t n : {256, 512, 4096}) {
    const std::vector<float> x = AwkwardValues(n, static_cast<uint32_t>(n) + 21);
    const std::vector<float> y = RoundTrip(GgmlType::kQ6_K, x);
    std::vector<BlockQ6_K> blocks(n / 256);
    QuantizeRow(GgmlType::kQ6_K, x.data(), blocks.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const BlockQ6_K& b = blocks[i / 256];
      const double step = double{Fp16ToFp32(b.d)} * b.scales[i % 256 / 16];
      const double err = std::fabs(double{y[i]} - x[i]);
      e.sum_err2 += err * err;
      e.sum_x2 += double{x[i]} * x[i];
      if (step == 0) {  // here only the all-zero sub-blocks of AwkwardValues: exact
        EXPECT_EQ(err, 0) << n << " " << i;
        continue;
      }
      const double level = x[i] / step;
      if (level < -32.5 || level > 31.5) {
        ++e.clamped;
        continue;
      }
      EXPECT_LE(err, std::fabs(step) * (0.5 * (1 + 1e-5) + 32 * 0x1p-22)) << n << " " << i;
    }
  }
  EXPECT_LE(e.clamped, (256 + 512 + 4096) / 100);
  EXPECT_LE(std::sqrt(e.sum_err2 / e.sum_x2), 0.03);
  std::printf("q6_k: %lld clamped, relative rms error %.4f\n", static_cast<long long>(e.clamped),
              std::sqrt(e.sum_err2 / e.sum_x2));
}

// ---- Errors

TEST(QuantErrorsTest, UnsupportedTypesAndSizesThrow) {
  EXPECT_TRUE(IsSupportedWeightType(GgmlType::kQ8_0));
  EXPECT_TRUE(IsSupportedWeightType(GgmlType::kBF16));
  EXPECT_TRUE(IsSupportedWeightType(GgmlType::kQ4_K));
  EXPECT_TRUE(IsSupportedWeightType(GgmlType::kQ6_K));
  EXPECT_TRUE(IsSupportedWeightType(GgmlType::kQ5_K));
  EXPECT_TRUE(IsSupportedWeightType(GgmlType::kQ2_K));
  EXPECT_FALSE(IsSupportedWeightType(GgmlType::kIQ2_XXS));
  EXPECT_FALSE(IsSupportedWeightType(GgmlType::kQ8_1));
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> bytes(1024);
  EXPECT_THROW(QuantizeRow(GgmlType::kIQ2_XXS, x.data(), bytes.data(), 256), Error);
  EXPECT_THROW(QuantizeRow(GgmlType::kIQ4_XS, x.data(), bytes.data(), 224), Error);  // not 256k
  EXPECT_THROW(DequantizeRow(GgmlType::kIQ2_XXS, bytes.data(), x.data(), 256), Error);
  EXPECT_THROW(QuantizeRow(GgmlType::kQ8_0, x.data(), bytes.data(), 48), Error);
  EXPECT_THROW(QuantizeRow(GgmlType::kQ4_K, x.data(), bytes.data(), 64), Error);  // not 256k
  EXPECT_THROW(DequantizeRow(GgmlType::kQ6_K, bytes.data(), x.data(), 160), Error);
  EXPECT_NO_THROW(QuantizeRow(GgmlType::kF16, x.data(), bytes.data(), 7));
}

// What the table says of the block types: every type read is computed with and written.
TEST(QuantErrorsTest, EachTypeSaysWhatGroveDoesWithIt) {
  for (GgmlType type : {GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K,
                        GgmlType::kQ3_K, GgmlType::kQ5_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS}) {
    EXPECT_TRUE(CanDequantize(type) && CanQuantize(type)) << GgmlTypeName(type);
    EXPECT_TRUE(IsSupportedWeightType(type)) << GgmlTypeName(type);
  }
  EXPECT_FALSE(CanDequantize(GgmlType::kIQ2_XXS));
  EXPECT_FALSE(CanQuantize(GgmlType::kIQ2_XXS));
  EXPECT_EQ(SupportedWeightTypeNames(),
            "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4, q2_k, q3_k, q4_k, q5_k, "
            "q6_k, iq4_xs");
}

// ---- llama.cpp's mixes (llama_tensor_get_type and tensor_type_fallback, llama-quant.cpp)

TEST(QuantMixTest, EachMixGivesTheMatricesLlamaCppGivesThem) {
  // A Llama-3-like model: 16 layers, 4 query heads per KV head, its own output matrix.
  const MixModel llama{.n_layer = 16, .has_output = true, .n_gqa = 4};
  auto type = [&](QuantMix mix, GgmlType base, const std::string& name, const MixModel& model) {
    return MixTensorType(mix, base, name, 1, model);
  };
  constexpr GgmlType k2 = GgmlType::kQ2_K, k3 = GgmlType::kQ3_K, k4 = GgmlType::kQ4_K,
                     k5 = GgmlType::kQ5_K, k6 = GgmlType::kQ6_K;
  // Q4_K_M / Q5_K_M: q6_K for output, and attn_v / ffn_down where use_more_bits (the first and
  // last eighth, and every third layer between: 4, 7, 10, 13 of 16). A fused QKV has attn_v's
  // rules (llama.cpp's category_is_attn_v; its own branch, one step up, is never reached):
  // quant_mix_reference_test checks every layer against llama.cpp itself.
  for (const auto& [mix, base] : {std::pair{QuantMix::kQ4_K_M, k4}, {QuantMix::kQ5_K_M, k5}}) {
    EXPECT_EQ(type(mix, base, "output.weight", llama), k6);
    EXPECT_EQ(type(mix, base, "token_embd.weight", llama), base);
    EXPECT_EQ(type(mix, base, "blk.0.attn_v.weight", llama), k6);
    EXPECT_EQ(type(mix, base, "blk.3.attn_v.weight", llama), base);
    EXPECT_EQ(type(mix, base, "blk.4.ffn_down.weight", llama), k6);
    EXPECT_EQ(type(mix, base, "blk.5.ffn_down.weight", llama), base);
    EXPECT_EQ(type(mix, base, "blk.15.attn_v.weight", llama), k6);
    EXPECT_EQ(type(mix, base, "blk.5.attn_q.weight", llama), base);
  }
  EXPECT_EQ(type(QuantMix::kQ4_K_M, k4, "blk.5.attn_qkv.weight", llama), k4);
  EXPECT_EQ(type(QuantMix::kQ4_K_M, k4, "blk.4.attn_qkv.weight", llama), k6);
  EXPECT_EQ(type(QuantMix::kQ5_K_M, k5, "blk.5.attn_qkv.weight", llama), k5);
  EXPECT_EQ(type(QuantMix::kQ5_K_M, k5, "blk.15.attn_qkv.weight", llama), k6);
  // Q3_K_M: attn_v q5_K in the first two layers then q4_K, ffn_down q5_K in the first sixteenth
  // then q4_K, attn_output q4_K.
  EXPECT_EQ(type(QuantMix::kQ3_K_M, k3, "output.weight", llama), k6);
  EXPECT_EQ(type(QuantMix::kQ3_K_M, k3, "blk.1.attn_v.weight", llama), k5);
  EXPECT_EQ(type(QuantMix::kQ3_K_M, k3, "blk.2.attn_v.weight", llama), k4);
  EXPECT_EQ(type(QuantMix::kQ3_K_M, k3, "blk.0.ffn_down.weight", llama), k5);
  EXPECT_EQ(type(QuantMix::kQ3_K_M, k3, "blk.1.ffn_down.weight", llama), k4);
  EXPECT_EQ(type(QuantMix::kQ3_K_M, k3, "blk.9.attn_output.weight", llama), k4);
  EXPECT_EQ(type(QuantMix::kQ3_K_M, k3, "blk.9.ffn_up.weight", llama), k3);
  EXPECT_EQ(type(QuantMix::kQ3_K_M, k3, "blk.9.attn_qkv.weight", llama), k4);
  // Q2_K: attn_v q4_K with 4+ query heads per KV head, else q3_K; ffn_down, attn_output q3_K; a
  // tied embedding is the output matrix (q6_K).
  const MixModel tied{.n_layer = 24, .has_output = false, .n_gqa = 1};
  EXPECT_EQ(type(QuantMix::kQ2_K, k2, "blk.0.attn_v.weight", llama), k4);
  EXPECT_EQ(type(QuantMix::kQ2_K, k2, "blk.0.attn_v.weight", tied), k3);
  EXPECT_EQ(type(QuantMix::kQ2_K, k2, "blk.7.ffn_down.weight", llama), k3);
  EXPECT_EQ(type(QuantMix::kQ2_K, k2, "blk.7.attn_output.weight", llama), k3);
  EXPECT_EQ(type(QuantMix::kQ2_K, k2, "blk.7.ffn_gate.weight", llama), k2);
  EXPECT_EQ(type(QuantMix::kQ2_K, k2, "token_embd.weight", tied), k6);
  EXPECT_EQ(type(QuantMix::kQ2_K, k2, "token_embd.weight", llama), k2);
  EXPECT_EQ(type(QuantMix::kNone, k3, "output.weight", llama), k3);
  // Q3_K_S and Q5_K_S: only the output matrix gets more bits. Q3_K_L: attn_v, ffn_down and
  // attn_output q5_K, fused QKV q4_K.
  for (const auto& [mix, base] : {std::pair{QuantMix::kQ3_K_S, k3}, {QuantMix::kQ5_K_S, k5}}) {
    EXPECT_EQ(type(mix, base, "output.weight", llama), k6);
    EXPECT_EQ(type(mix, base, "blk.0.attn_v.weight", llama), base);
    EXPECT_EQ(type(mix, base, "blk.0.ffn_down.weight", llama), base);
  }
  EXPECT_EQ(type(QuantMix::kQ3_K_L, k3, "blk.9.attn_v.weight", llama), k5);
  EXPECT_EQ(type(QuantMix::kQ3_K_L, k3, "blk.9.ffn_down.weight", llama), k5);
  EXPECT_EQ(type(QuantMix::kQ3_K_L, k3, "blk.9.attn_output.weight", llama), k5);
  EXPECT_EQ(type(QuantMix::kQ3_K_L, k3, "blk.9.attn_qkv.weight", llama), k5);
  EXPECT_EQ(type(QuantMix::kQ3_K_L, k3, "blk.9.ffn_up.weight", llama), k3);
  // Q4_K_S: attn_v q5_K in the first four layers, ffn_down q5_K in the first eighth.
  EXPECT_EQ(type(QuantMix::kQ4_K_S, k4, "blk.3.attn_v.weight", llama), k5);
  EXPECT_EQ(type(QuantMix::kQ4_K_S, k4, "blk.4.attn_v.weight", llama), k4);
  EXPECT_EQ(type(QuantMix::kQ4_K_S, k4, "blk.1.ffn_down.weight", llama), k5);
  EXPECT_EQ(type(QuantMix::kQ4_K_S, k4, "blk.2.ffn_down.weight", llama), k4);
  // IQ4_NL / IQ4_XS without an importance matrix: attn_v q5_K with 4+ query heads per KV head,
  // ffn_down q5_K in the first eighth, output q6_K.
  for (GgmlType base : {GgmlType::kIQ4_NL, GgmlType::kIQ4_XS}) {
    EXPECT_EQ(type(QuantMix::kIQ4, base, "output.weight", llama), k6);
    EXPECT_EQ(type(QuantMix::kIQ4, base, "blk.9.attn_v.weight", llama), k5);
    EXPECT_EQ(type(QuantMix::kIQ4, base, "blk.9.attn_v.weight", tied), base);
    EXPECT_EQ(type(QuantMix::kIQ4, base, "blk.1.ffn_down.weight", llama), k5);
    EXPECT_EQ(type(QuantMix::kIQ4, base, "blk.2.ffn_down.weight", llama), base);
    EXPECT_EQ(type(QuantMix::kIQ4, base, "blk.2.attn_output.weight", llama), base);
  }
}

TEST(QuantMixTest, RowsThatDoNotFitFallBackAsInLlamaCpp) {
  EXPECT_EQ(FallbackType(GgmlType::kQ2_K, 896), GgmlType::kQ4_0);
  EXPECT_EQ(FallbackType(GgmlType::kQ3_K, 896), GgmlType::kQ4_0);
  EXPECT_EQ(FallbackType(GgmlType::kQ4_K, 896), GgmlType::kQ5_0);
  EXPECT_EQ(FallbackType(GgmlType::kQ5_K, 896), GgmlType::kQ5_1);
  EXPECT_EQ(FallbackType(GgmlType::kQ6_K, 896), GgmlType::kQ8_0);
  EXPECT_EQ(FallbackType(GgmlType::kIQ4_XS, 896), GgmlType::kIQ4_NL);
  EXPECT_EQ(FallbackType(GgmlType::kQ4_K, 1024), GgmlType::kQ4_K);
  EXPECT_EQ(FallbackType(GgmlType::kQ4_K, 100), GgmlType::kF16);
  EXPECT_EQ(FallbackType(GgmlType::kQ8_0, 100), GgmlType::kF16);
  EXPECT_EQ(FallbackType(GgmlType::kF32, 7), GgmlType::kF32);
}

// FirstNonFiniteScale finds a NaN or infinite scale in every block type, in d and in the min's
// scale (m, dmin) where the type has one, and nothing in blocks whose scales are finite.
template <typename Block>
void ExpectBadScalesFound(GgmlType type) {
  SCOPED_TRACE(GgmlTypeName(type));
  std::vector<Block> blocks(4);
  std::memset(blocks.data(), 0, blocks.size() * sizeof(Block));
  const int64_t n = static_cast<int64_t>(blocks.size()) * GgmlTraits(type).block_size;
  EXPECT_EQ(FirstNonFiniteScale(type, blocks.data(), n), -1);
  blocks[3].d = 0x7E00;  // NaN
  blocks[2].d = 0x7C00;  // +inf
  EXPECT_EQ(FirstNonFiniteScale(type, blocks.data(), n), 2);
  blocks[2].d = blocks[3].d = 0x3C00;  // 1
  EXPECT_EQ(FirstNonFiniteScale(type, blocks.data(), n), -1);
  if constexpr (requires { blocks[1].m; }) {
    blocks[1].m = 0xFC00;  // -inf
    EXPECT_EQ(FirstNonFiniteScale(type, blocks.data(), n), 1);
  }
  if constexpr (requires { blocks[1].dmin; }) {
    blocks[1].dmin = 0xFE00;
    EXPECT_EQ(FirstNonFiniteScale(type, blocks.data(), n), 1);
  }
}

TEST(FirstNonFiniteScale, EveryBlockTypeAndScaleField) {
  ExpectBadScalesFound<BlockQ8_0>(GgmlType::kQ8_0);
  ExpectBadScalesFound<BlockQ4_0>(GgmlType::kQ4_0);
  ExpectBadScalesFound<BlockQ4_1>(GgmlType::kQ4_1);
  ExpectBadScalesFound<BlockQ5_0>(GgmlType::kQ5_0);
  ExpectBadScalesFound<BlockQ5_1>(GgmlType::kQ5_1);
  ExpectBadScalesFound<BlockIQ4_NL>(GgmlType::kIQ4_NL);
  ExpectBadScalesFound<BlockQ2_K>(GgmlType::kQ2_K);
  ExpectBadScalesFound<BlockQ3_K>(GgmlType::kQ3_K);
  ExpectBadScalesFound<BlockQ4_K>(GgmlType::kQ4_K);
  ExpectBadScalesFound<BlockQ5_K>(GgmlType::kQ5_K);
  ExpectBadScalesFound<BlockQ6_K>(GgmlType::kQ6_K);
  ExpectBadScalesFound<BlockIQ4_XS>(GgmlType::kIQ4_XS);
  // MXFP4's exponent byte: every value is a finite power of two but 0xFF, E8M0's NaN.
  std::vector<BlockMXFP4> mxfp4(4);
  for (BlockMXFP4& b : mxfp4) b = {.e = 0xFE, .qs = {}};
  EXPECT_EQ(FirstNonFiniteScale(GgmlType::kMXFP4, mxfp4.data(), 4 * 32), -1);
  mxfp4[2].e = 0xFF;
  EXPECT_EQ(FirstNonFiniteScale(GgmlType::kMXFP4, mxfp4.data(), 4 * 32), 2);
  // The float types have no scales.
  const float values[2] = {NAN, 1.0f};
  EXPECT_EQ(FirstNonFiniteScale(GgmlType::kF32, values, 2), -1);
}

}  // namespace
}  // namespace grove
