// MatMul against a double-precision reference with explicit error bounds, the batch-invariance
// contract (a row's output is bit-identical alone, in any batch, on any thread count), and every
// SIMD level against the scalar reference kernels.
#include "ops/matmul.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "allocation_counter.h"
#include "base/error.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_set.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/k_quants.h"
#include "quant/packed.h"
#include "quant/quant.h"
#include "test_support.h"

namespace grove {
namespace {

using testing::AvailableKernelLevels;

constexpr double kUnit = 0x1p-24;  // float unit roundoff

constexpr GgmlType kAllTypes[] = {
    GgmlType::kF32,    GgmlType::kF16,  GgmlType::kBF16,   GgmlType::kQ8_0,
    GgmlType::kQ4_0,   GgmlType::kQ5_0, GgmlType::kIQ4_NL, GgmlType::kQ4_1,
    GgmlType::kQ5_1,   GgmlType::kQ4_K, GgmlType::kQ5_K,   GgmlType::kQ6_K,
    GgmlType::kIQ4_XS, GgmlType::kQ2_K, GgmlType::kQ3_K,   GgmlType::kMXFP4};

bool IsKQuant(GgmlType type) {
  return type == GgmlType::kQ2_K || type == GgmlType::kQ3_K || type == GgmlType::kQ4_K ||
         type == GgmlType::kQ5_K || type == GgmlType::kQ6_K || type == GgmlType::kIQ4_XS;
}

// The types whose value has an offset (d q + m, or d sc q - dmin m for the k-quants): their
// kernels accumulate a scale term and a min term per block.
bool HasMins(GgmlType type) {
  return type == GgmlType::kQ4_1 || type == GgmlType::kQ5_1 || type == GgmlType::kQ2_K ||
         type == GgmlType::kQ4_K || type == GgmlType::kQ5_K;
}

bool IsQuantized(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0 || type == GgmlType::kQ5_0 ||
         type == GgmlType::kIQ4_NL || type == GgmlType::kMXFP4 || HasMins(type) || IsKQuant(type);
}

// The fp16 scale fields of a block of a type grove reads but does not write, and the largest
// integer factor a scale meets (so that values come out near `scale`).
struct ScaleFields {
  std::vector<int> offsets;
  float max_factor;
};
ScaleFields ScaleFieldsOf(GgmlType type) {
  switch (type) {
    case GgmlType::kIQ4_NL:
      return {{0}, 127.0f};
    case GgmlType::kIQ4_XS:
      return {{0}, 127.0f * 32.0f};
    default:
      ADD_FAILURE() << "no random blocks for " << GgmlTypeName(type);
      return {{}, 1.0f};
  }
}

// A row of random blocks (every quant and sub-scale bit pattern) with finite scales near `scale`:
// the weights of a type grove has no quantizer for.
void RandomBlocks(GgmlType type, int64_t n_in, float scale, std::mt19937& rng, uint8_t* out) {
  const int64_t block_size = GgmlTraits(type).block_size;
  const int64_t block_bytes = GgmlRowBytes(type, block_size);
  const ScaleFields fields = ScaleFieldsOf(type);
  std::uniform_real_distribution<float> factor(0.5f, 1.5f);
  for (int64_t b = 0; b < n_in / block_size; ++b) {
    uint8_t* block = out + b * block_bytes;
    for (int64_t i = 0; i < block_bytes; ++i) block[i] = static_cast<uint8_t>(rng());
    for (int offset : fields.offsets) {
      const uint16_t d = Fp32ToFp16(scale * factor(rng) / fields.max_factor);
      std::memcpy(block + offset, &d, sizeof(d));
    }
  }
}

// Reduction lengths to test: k-quant rows are whole super-blocks of 256, so they get their own
// list (an odd number of super-blocks included); the others take the caller's list.
std::vector<int64_t> Widths(GgmlType type, std::vector<int64_t> widths) {
  if (IsKQuant(type)) return {256, 768, 4096};
  return widths;
}

// A kernel level with the matrix in rows, or regrouped for the level's group kernel.
struct Variant {
  const KernelSet* k;
  bool grouped;
};

// A weight matrix in one type, with its exact float values (dequantized) for the reference.
struct TestWeights {
  GgmlType type;
  int64_t n_in = 0, n_out = 0, row_bytes = 0;
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // n_out x n_in, what the stored weights mean
  // n_out x n_in: the magnitude the kernels' float arithmetic works with per weight. |w|, except
  // for the types with an offset, whose kernels handle d sc q and dmin m (or d q and m) separately:
  // |d sc q| + |dmin m|.
  std::vector<float> magnitudes;
  // The same matrix regrouped for the group kernels (quant/packed.h), where the type has a layout.
  std::vector<uint8_t> grouped_bytes;
  WeightView grouped;

  WeightView View() const { return {type, bytes.data(), n_in, n_out, row_bytes}; }
};

TestWeights MakeWeights(GgmlType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  TestWeights w;
  w.type = type;
  w.n_in = n_in;
  w.n_out = n_out;
  w.row_bytes = GgmlRowBytes(type, n_in);
  w.bytes.resize(w.row_bytes * n_out);  // no slack: ASan builds catch reads past the end
  w.values.resize(n_in * n_out);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(n_in);
  for (int64_t o = 0; o < n_out; ++o) {
    const float scale = 0.02f * static_cast<float>(1 + o % 5);
    for (float& v : row) v = normal(rng) * scale;
    if (o % 7 == 3) row[0] = 1.5f;  // an outlier: blocks with one dominant value
    if (CanQuantize(type)) {
      QuantizeRow(type, row.data(), w.bytes.data() + o * w.row_bytes, n_in);
    } else {
      RandomBlocks(type, n_in, scale, rng, w.bytes.data() + o * w.row_bytes);
    }
    DequantizeRow(type, w.bytes.data() + o * w.row_bytes, w.values.data() + o * n_in, n_in);
  }
  if (HasGroupLayout(type)) {
    ThreadPool pool(1);
    w.grouped_bytes.resize(GroupedMatrixBytes(w.View()));  // no slack, as above
    w.grouped = PackMatrix(w.View(), w.grouped_bytes.data(), pool);
  }
  w.magnitudes.resize(n_in * n_out);
  for (int64_t i = 0; i < n_in * n_out; ++i) w.magnitudes[i] = std::fabs(w.values[i]);
  if (type == GgmlType::kQ4_1 || type == GgmlType::kQ5_1) {
    // |d q| + |m|: the value is d q + m, and q = (value - m) / d exactly in float when d != 0.
    for (int64_t o = 0; o < n_out; ++o) {
      const uint8_t* row = w.bytes.data() + o * w.row_bytes;
      for (int64_t k = 0; k < n_in; ++k) {
        const uint8_t* block = row + k / 32 * GgmlRowBytes(type, 32);
        const auto& head = *reinterpret_cast<const BlockQ4_1*>(block);  // d, m
        const float d = Fp16ToFp32(head.d), m = Fp16ToFp32(head.m);
        const float q = d != 0 ? std::round((w.values[o * n_in + k] - m) / d) : 0.0f;
        w.magnitudes[o * n_in + k] = std::fabs(d * q) + std::fabs(m);
      }
    }
  } else if (type == GgmlType::kQ2_K) {
    for (int64_t o = 0; o < n_out; ++o) {
      const auto* blocks = reinterpret_cast<const BlockQ2_K*>(w.bytes.data() + o * w.row_bytes);
      for (int64_t k = 0; k < n_in; ++k) {
        const BlockQ2_K& b = blocks[k / 256];
        const int e = static_cast<int>(k % 256);
        const int packed = b.scales[e / 16];
        const int q = (b.qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3;
        w.magnitudes[o * n_in + k] = Fp16ToFp32(b.d) * static_cast<float>((packed & 15) * q) +
                                     Fp16ToFp32(b.dmin) * static_cast<float>(packed >> 4);
      }
    }
  } else if (HasMins(type)) {
    // Both formats keep their nibbles as Q4_K does; Q5_K adds bit 4 from qh (see BlockQ5_K).
    const int64_t block_bytes = GgmlRowBytes(type, 256);
    for (int64_t o = 0; o < n_out; ++o) {
      const uint8_t* row = w.bytes.data() + o * w.row_bytes;
      for (int64_t k = 0; k < n_in; ++k) {
        const uint8_t* block = row + k / 256 * block_bytes;
        const auto& head = *reinterpret_cast<const BlockQ4_K*>(block);  // d, dmin, scales
        const uint8_t* qs = type == GgmlType::kQ4_K ? reinterpret_cast<const BlockQ4_K*>(block)->qs
                                                    : reinterpret_cast<const BlockQ5_K*>(block)->qs;
        const int j = static_cast<int>(k % 256 / 32);
        int sc, m;
        UnpackQ4_KScaleMin(head.scales, j, &sc, &m);
        int level = (qs[k % 256 / 64 * 32 + k % 32] >> (k % 64 / 32 * 4)) & 15;
        if (type == GgmlType::kQ5_K) {
          level |= ((reinterpret_cast<const BlockQ5_K*>(block)->qh[k % 32] >> j) & 1) << 4;
        }
        w.magnitudes[o * n_in + k] =
            Fp16ToFp32(head.d) * sc * static_cast<float>(level) + Fp16ToFp32(head.dmin) * m;
      }
    }
  }
  return w;
}

std::vector<float> MakeActivations(int n_rows, int64_t n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n_rows * n_in);
  for (int r = 0; r < n_rows; ++r) {
    for (int64_t k = 0; k < n_in; ++k) {
      float v = normal(rng) * static_cast<float>(1 + r % 3);
      if ((k + r) % 97 == 0) v *= 20.0f;    // activation outliers, as in real hidden states
      if (r % 11 == 5 && k < 32) v = 0.0f;  // an all-zero block (scale 0)
      x[r * n_in + k] = v;
    }
  }
  return x;
}

// The exact product in double, and for each output an upper bound on |kernel - exact|:
// - float weights: any order of n_in float multiply-adds is within gamma_(n_in+2) * sum |w x|.
// - q8_0/q4_0 weights: activation quantization moves x_k by at most d_b (0.5 + 3e-5) with
//   d_b = amax_b / 127 of its block; the float work (scale product, conversion, an accumulation at
//   most n_blocks + 6 deep) adds gamma_(n_blocks+6) * sum |w| (|x| + d_b).
struct Reference {
  std::vector<double> y;
  std::vector<double> bound;        // total bound against y
  std::vector<double> float_bound;  // the float arithmetic part only (levels differ only there)
};

Reference ComputeReference(const TestWeights& w, const std::vector<float>& x, int n_rows) {
  const int64_t n_in = w.n_in, n_out = w.n_out;
  Reference ref;
  ref.y.resize(n_rows * n_out);
  ref.bound.resize(n_rows * n_out);
  ref.float_bound.resize(n_rows * n_out);
  std::vector<double> block_d(n_in / 32 + 1);
  for (int r = 0; r < n_rows; ++r) {
    const float* xr = x.data() + r * n_in;
    if (IsQuantized(w.type)) {
      for (int64_t b = 0; b < n_in / 32; ++b) {
        double amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(double{xr[b * 32 + j]}));
        block_d[b] = amax / 127;
      }
    }
    for (int64_t o = 0; o < n_out; ++o) {
      const float* wo = w.values.data() + o * n_in;
      const float* mo = w.magnitudes.data() + o * n_in;
      double sum = 0, abs_sum = 0, quant_err = 0, quant_abs = 0;
      for (int64_t k = 0; k < n_in; ++k) {
        const double wk = wo[k], xk = xr[k];
        sum += wk * xk;
        abs_sum += std::fabs(wk * xk);
        if (IsQuantized(w.type)) {
          quant_err += std::fabs(wk) * block_d[k / 32] * (0.5 + 3e-5);
          quant_abs += double{mo[k]} * (std::fabs(xk) + block_d[k / 32]);
        }
      }
      const int64_t i = r * n_out + o;
      ref.y[i] = sum;
      if (IsQuantized(w.type)) {
        // Q4_K/Q5_K accumulate a scale and a min term per block (the scalar level in one chain).
        const int64_t terms = HasMins(w.type) ? 2 * (n_in / 32) : n_in / 32;
        const double depth = static_cast<double>(terms + 6);
        ref.float_bound[i] = 1.01 * depth * kUnit * quant_abs + 1e-30;
        ref.bound[i] = quant_err + ref.float_bound[i];
      } else {
        ref.float_bound[i] = 1.01 * static_cast<double>(n_in + 2) * kUnit * abs_sum + 1e-30;
        ref.bound[i] = ref.float_bound[i];
      }
    }
  }
  return ref;
}

// Every level with the rows of w, and the levels that have a group kernel for w's type with the
// grouped matrix too. The scalar rows come first (the reference of the others).
std::vector<Variant> Variants(const TestWeights& w) {
  std::vector<Variant> variants;
  for (const KernelSet* k : AvailableKernelLevels()) variants.push_back({k, false});
  for (const KernelSet* k : AvailableKernelLevels()) {
    if (CanGroup(*k, w.View())) variants.push_back({k, true});
  }
  return variants;
}

std::string Describe(const Variant& v, const TestWeights& w, int n_rows) {
  return StrCat(v.k->name, v.grouped ? " grouped " : " ", GgmlTypeName(w.type), " n_in=", w.n_in,
                " n_out=", w.n_out, " n_rows=", n_rows);
}

// Runs MatMul and checks that it wrote exactly n_rows x n_out outputs (guards past the end).
std::vector<float> RunMatMul(const Variant& v, const TestWeights& w, const float* x, int n_rows,
                             MatMulScratch& scratch, ThreadPool& pool) {
  constexpr float kGuard = -12345.0f;
  std::vector<float> y(n_rows * w.n_out + 16, kGuard);
  MatMulWithKernels(*v.k, v.grouped ? w.grouped : w.View(), x, n_rows, y.data(), scratch, pool);
  for (size_t i = n_rows * w.n_out; i < y.size(); ++i) EXPECT_EQ(y[i], kGuard) << "wrote past end";
  y.resize(n_rows * w.n_out);
  return y;
}

bool BitEqual(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

TEST(MatMulTest, AllShapesWithinBoundAndPrefixOfBatchIsBitIdentical) {
  const int kRowCounts[] = {1, 2, 3, 5, 8, 13, 16, 31, 64};
  const int64_t kNOut[] = {1, 3, 17, 64, 257};
  ThreadPool pool(2);
  MatMulScratch scratch(64, 4096);
  uint32_t seed = 1;
  for (GgmlType type : kAllTypes) {
    std::vector<int64_t> n_ins = Widths(type, {32, 64, 96, 160, 4096});
    if (!IsQuantized(type)) n_ins.insert(n_ins.end(), {1, 7, 17, 33, 100});  // SIMD tails
    for (int64_t n_in : n_ins) {
      for (int64_t n_out : kNOut) {
        const TestWeights w = MakeWeights(type, n_in, n_out, ++seed);
        const std::vector<float> x = MakeActivations(64, n_in, ++seed);
        const Reference ref = ComputeReference(w, x, 64);
        for (const Variant& v : Variants(w)) {
          const std::vector<float> full = RunMatMul(v, w, x.data(), 64, scratch, pool);
          for (size_t i = 0; i < full.size(); ++i) {
            ASSERT_LE(std::fabs(full[i] - ref.y[i]), ref.bound[i])
                << Describe(v, w, 64) << " output " << i << ": got " << full[i] << ", exact "
                << ref.y[i];
          }
          for (int n_rows : kRowCounts) {
            const std::vector<float> part = RunMatMul(v, w, x.data(), n_rows, scratch, pool);
            ASSERT_TRUE(BitEqual(part.data(), full.data(), part.size())) << Describe(v, w, n_rows);
          }
        }
      }
    }
  }
}

// Contract 2 of the architecture: each row alone == that row inside a batch of 64, bit for bit,
// with 1, 2 or 3 threads, and in a batch whose rows are in another order.
TEST(MatMulTest, RowResultDoesNotDependOnBatchOrThreads) {
  ThreadPool pool1(1), pool2(2), pool3(3);
  MatMulScratch scratch(64, 4096);
  constexpr int kRows = 64;
  uint32_t seed = 1000;
  for (GgmlType type : kAllTypes) {
    for (int64_t n_in : Widths(type, {160, 4096})) {
      const TestWeights w = MakeWeights(type, n_in, 67, ++seed);
      const std::vector<float> x = MakeActivations(kRows, n_in, ++seed);
      for (const Variant& k : Variants(w)) {
        const std::vector<float> batch = RunMatMul(k, w, x.data(), kRows, scratch, pool2);
        EXPECT_TRUE(BitEqual(batch.data(), RunMatMul(k, w, x.data(), kRows, scratch, pool1).data(),
                             batch.size()))
            << Describe(k, w, kRows) << " 1 vs 2 threads";
        EXPECT_TRUE(BitEqual(batch.data(), RunMatMul(k, w, x.data(), kRows, scratch, pool3).data(),
                             batch.size()))
            << Describe(k, w, kRows) << " 3 vs 2 threads";
        for (int r = 0; r < kRows; ++r) {
          const std::vector<float> alone = RunMatMul(k, w, x.data() + r * n_in, 1, scratch, pool1);
          ASSERT_TRUE(BitEqual(alone.data(), batch.data() + r * w.n_out, w.n_out))
              << Describe(k, w, kRows) << " row " << r << " alone";
        }
        // Reversed batch of 37 rows: row r sits at position 36 - r, in another tile.
        std::vector<float> reversed(37 * n_in);
        for (int r = 0; r < 37; ++r) {
          std::copy_n(x.data() + r * n_in, n_in, reversed.data() + (36 - r) * n_in);
        }
        const std::vector<float> y_rev = RunMatMul(k, w, reversed.data(), 37, scratch, pool2);
        for (int r = 0; r < 37; ++r) {
          ASSERT_TRUE(
              BitEqual(y_rev.data() + (36 - r) * w.n_out, batch.data() + r * w.n_out, w.n_out))
              << Describe(k, w, 37) << " reversed row " << r;
        }
      }
    }
  }
}

// A group kernel's float steps are the same on every level that has one (lane j is row j, the
// integer block sums are exact), so two levels' grouped products agree bit for bit.
TEST(MatMulTest, GroupKernelsGiveTheSameBitsOnEveryLevel) {
  ThreadPool pool(2);
  MatMulScratch scratch(16, 4096);
  uint32_t seed = 3000;
  int compared = 0;
  for (GgmlType type : kAllTypes) {
    // F16 also at an odd width: the last element goes to the even chain alone.
    const std::vector<int64_t> widths =
        type == GgmlType::kF16 ? std::vector<int64_t>{257, 4096} : Widths(type, {256, 4096});
    for (int64_t n_in : widths) {
      const TestWeights w = MakeWeights(type, n_in, 37, ++seed);
      const std::vector<float> x = MakeActivations(9, n_in, ++seed);
      std::vector<Variant> grouped;
      for (const Variant& v : Variants(w)) {
        if (v.grouped) grouped.push_back(v);
      }
      if (grouped.size() < 2) continue;
      // 1, 2 and 9 rows: every tile size of both levels (AVX-512 8 + 1, AVX2 4s or 3s and rest).
      for (int n_rows : {1, 2, 9}) {
        const std::vector<float> first = RunMatMul(grouped[0], w, x.data(), n_rows, scratch, pool);
        for (size_t l = 1; l < grouped.size(); ++l) {
          EXPECT_EQ(RunMatMul(grouped[l], w, x.data(), n_rows, scratch, pool), first)
              << Describe(grouped[l], w, n_rows) << " against " << grouped[0].k->name;
          ++compared;
        }
      }
    }
  }
  if (compared == 0) GTEST_SKIP() << "fewer than two levels with group kernels on this CPU";
}

// Levels differ only in float rounding: activation quantization is bit-identical across levels, so
// two levels can be at most twice the float-arithmetic bound apart.
TEST(MatMulTest, SimdLevelsMatchScalarWithinBound) {
  const auto levels = AvailableKernelLevels();
  if (levels.size() < 2) GTEST_SKIP() << "only the scalar kernels run on this CPU";
  ThreadPool pool(2);
  MatMulScratch scratch(16, 4096);
  uint32_t seed = 2000;
  for (GgmlType type : kAllTypes) {
    for (int64_t n_in : Widths(type, {32, 96, 4096})) {
      const TestWeights w = MakeWeights(type, n_in, 33, ++seed);
      const std::vector<float> x = MakeActivations(16, n_in, ++seed);
      const Reference ref = ComputeReference(w, x, 16);
      const std::vector<Variant> variants = Variants(w);
      const std::vector<float> scalar = RunMatMul(variants[0], w, x.data(), 16, scratch, pool);
      for (size_t l = 1; l < variants.size(); ++l) {
        const std::vector<float> simd = RunMatMul(variants[l], w, x.data(), 16, scratch, pool);
        for (size_t i = 0; i < simd.size(); ++i) {
          ASSERT_LE(std::fabs(double{simd[i]} - scalar[i]), 2 * ref.float_bound[i])
              << Describe(variants[l], w, 16) << " output " << i;
        }
      }
    }
  }
}

// Where a level stores the quant of element i (kernel_set.h): in order, or for the AVX-512 level
// with the 4-byte groups of each pair of blocks interleaved.
int64_t QuantPosition(const KernelSet& k, int64_t i) {
  if (!k.act_q8_unsigned) return i;
  const int64_t block = i / 32, j = i % 32;
  return block / 2 * 64 + (j / 4 * 2 + block % 2) * 4 + j % 4;
}

TEST(MatMulTest, ActivationQuantizationIsIdenticalAcrossLevels) {
  const auto levels = AvailableKernelLevels();
  for (int64_t n_in : {32, 64, 96, 160, 4096}) {
    std::vector<float> x = MakeActivations(5, n_in, static_cast<uint32_t>(n_in));
    // Row 4, block 0: so small that 1 / d overflows (amax / 127 is subnormal); its quants are 0
    // on every level (the SIMD levels saturated the infinities to -128, the scalar one's cast was
    // undefined).
    for (int j = 0; j < 32; ++j) x[4 * n_in + j] = (j % 3 - 1) * 1e-38f * static_cast<float>(j);
    const int64_t scale_offset = ActQ8ScaleOffset(n_in);
    const int64_t sum_offset = ActQ8SumOffset(n_in);
    const int64_t half_offset = ActQ8HalfSumOffset(n_in);
    for (int r = 0; r < 5; ++r) {
      std::vector<uint8_t> want(ActQ8RowBytes(n_in));
      levels[0]->quantize_act(x.data() + r * n_in, n_in, want.data());
      if (r == 4) {
        for (int j = 0; j < 32; ++j) ASSERT_EQ(want[j], 0) << "element " << j;
      }
      const auto* want_scales = reinterpret_cast<const float*>(want.data() + scale_offset);
      const auto* want_sums = reinterpret_cast<const float*>(want.data() + sum_offset);
      const auto* want_halves = reinterpret_cast<const float*>(want.data() + half_offset);
      // The scalar level's block and half-block sums are the definition: d_b times the exact sum
      // of the quants.
      for (int64_t b = 0; b < n_in / 32; ++b) {
        int32_t half[2] = {0, 0};
        for (int j = 0; j < 32; ++j) half[j / 16] += static_cast<int8_t>(want[b * 32 + j]);
        ASSERT_EQ(want_sums[b], want_scales[b] * static_cast<float>(half[0] + half[1]))
            << "block " << b;
        for (int h = 0; h < 2; ++h) {
          ASSERT_EQ(want_halves[2 * b + h], want_scales[b] * static_cast<float>(half[h]))
              << "block " << b << " half " << h;
        }
      }
      for (size_t l = 1; l < levels.size(); ++l) {
        const KernelSet& k = *levels[l];
        std::vector<uint8_t> got(ActQ8RowBytes(n_in));
        k.quantize_act(x.data() + r * n_in, n_in, got.data());
        for (int64_t i = 0; i < n_in; ++i) {
          ASSERT_EQ(got[QuantPosition(k, i)] ^ (k.act_q8_unsigned ? 0x80 : 0), want[i])
              << k.name << " element " << i;
        }
        const auto* got_scales = reinterpret_cast<const float*>(got.data() + scale_offset);
        const auto* got_sums = reinterpret_cast<const float*>(got.data() + sum_offset);
        const auto* got_halves = reinterpret_cast<const float*>(got.data() + half_offset);
        for (int64_t b = 0; b < n_in / 32; ++b) {
          ASSERT_EQ(got_scales[b], want_scales[b]) << k.name << " block " << b;
          ASSERT_EQ(got_sums[b], want_sums[b]) << k.name << " block " << b;
          ASSERT_EQ(got_halves[2 * b], want_halves[2 * b]) << k.name << " block " << b;
          ASSERT_EQ(got_halves[2 * b + 1], want_halves[2 * b + 1]) << k.name << " block " << b;
        }
      }
    }
  }
}

// Prompt processing: more rows than one pass over the weights takes (several row blocks).
TEST(MatMulTest, LargeBatchOf512Rows) {
  ThreadPool pool(2);
  MatMulScratch scratch(512, 256);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ5_K,
                        GgmlType::kQ6_K, GgmlType::kF16}) {
    const TestWeights w = MakeWeights(type, 256, 40, 77);
    const std::vector<float> x = MakeActivations(512, 256, 78);
    const Reference ref = ComputeReference(w, x, 512);
    for (const Variant& v : Variants(w)) {
      const std::vector<float> y = RunMatMul(v, w, x.data(), 512, scratch, pool);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_LE(std::fabs(y[i] - ref.y[i]), ref.bound[i]) << Describe(v, w, 512) << " " << i;
      }
      for (int r : {0, 63, 64, 300, 511}) {
        const std::vector<float> alone = RunMatMul(v, w, x.data() + r * 256, 1, scratch, pool);
        ASSERT_TRUE(BitEqual(alone.data(), y.data() + r * w.n_out, w.n_out)) << r;
      }
    }
  }
}

TEST(MatMulTest, DoesNotAllocate) {
  ThreadPool pool(2);
  MatMulScratch scratch(16, 512);
  for (GgmlType type : kAllTypes) {
    const TestWeights w = MakeWeights(type, 512, 100, 5);
    const std::vector<float> x = MakeActivations(16, 512, 6);
    std::vector<float> y(16 * 100);
    for (const Variant& v : Variants(w)) {
      const WeightView view = v.grouped ? w.grouped : w.View();
      MatMulWithKernels(*v.k, view, x.data(), 16, y.data(), scratch, pool);  // warm up
      testing::AllocationCounter allocations;
      for (int n_rows : {1, 5, 16}) {
        MatMulWithKernels(*v.k, view, x.data(), n_rows, y.data(), scratch, pool);
      }
      if (!v.grouped || CanGroup(ActiveKernels(), w.View())) {
        MatMul(view, x.data(), 16, y.data(), scratch, pool);
      }
      EXPECT_EQ(allocations.count(), 0) << Describe(v, w, 16);
    }
  }
}

// MatMulFused (Q, K, V) and MatMulColumns (gate, up + epilogue) give exactly the bits of separate
// MatMul calls, for every batch size and thread count, with output ranges that split matrices at
// odd rows and a width that leaves a last partial chunk.
TEST(MatMulTest, FusedMatMulsEqualSeparateCalls) {
  for (GgmlType type : kAllTypes) {
    const int64_t n_in = IsKQuant(type) ? 512 : 160;
    const TestWeights a = MakeWeights(type, n_in, 67, 11);
    const TestWeights b = MakeWeights(type, n_in, 13, 12);
    const TestWeights c = MakeWeights(type, n_in, 67, 13);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      MatMulScratch scratch(16, n_in);
      for (int n_rows : {1, 5, 16}) {
        const std::vector<float> x = MakeActivations(n_rows, n_in, 14);
        std::vector<float> want_a(n_rows * 67), want_b(n_rows * 13), want_c(n_rows * 67);
        MatMul(a.View(), x.data(), n_rows, want_a.data(), scratch, pool);
        MatMul(b.View(), x.data(), n_rows, want_b.data(), scratch, pool);
        MatMul(c.View(), x.data(), n_rows, want_c.data(), scratch, pool);
        std::vector<float> got_a(want_a.size()), got_b(want_b.size()), got_c(want_c.size());
        const MatMulOutput three[] = {
            {a.View(), got_a.data()}, {b.View(), got_b.data()}, {c.View(), got_c.data()}};
        ASSERT_TRUE(CanFuseMatMuls(three));
        MatMulFused(three, x.data(), n_rows, scratch, pool);
        EXPECT_EQ(got_a, want_a) << GgmlTypeName(type) << " threads " << threads;
        EXPECT_EQ(got_b, want_b) << GgmlTypeName(type) << " threads " << threads;
        EXPECT_EQ(got_c, want_c) << GgmlTypeName(type) << " threads " << threads;

        // Columns: each epilogue call sees its own columns of both outputs, already computed.
        std::fill(got_a.begin(), got_a.end(), 0.0f);
        std::fill(got_c.begin(), got_c.end(), 0.0f);
        std::vector<int> seen(67, 0);
        const MatMulOutput two[] = {{a.View(), got_a.data()}, {c.View(), got_c.data()}};
        MatMulColumns(
            two, x.data(), n_rows,
            [&](int64_t o_begin, int64_t o_end) {
              for (int64_t o = o_begin; o < o_end; ++o) {
                ++seen[o];
                for (int r = 0; r < n_rows; ++r) got_a[r * 67 + o] += got_c[r * 67 + o];
              }
            },
            scratch, pool);
        for (int64_t i = 0; i < static_cast<int64_t>(want_a.size()); ++i) {
          ASSERT_EQ(got_a[i], want_a[i] + want_c[i]) << GgmlTypeName(type) << " element " << i;
        }
        EXPECT_EQ(seen, std::vector<int>(67, 1));
      }
    }
  }
  const TestWeights f = MakeWeights(GgmlType::kF16, 160, 8, 1);
  const TestWeights q = MakeWeights(GgmlType::kQ8_0, 160, 8, 2);
  const TestWeights wide = MakeWeights(GgmlType::kQ8_0, 192, 8, 3);
  EXPECT_FALSE(CanFuseMatMuls(std::vector<MatMulOutput>{{f.View(), nullptr}, {q.View(), nullptr}}));
  EXPECT_FALSE(
      CanFuseMatMuls(std::vector<MatMulOutput>{{q.View(), nullptr}, {wide.View(), nullptr}}));
}

TEST(MatMulTest, ScratchLimitsAreChecked) {
  ThreadPool pool(1);
  MatMulScratch scratch(4, 64);
  const TestWeights w = MakeWeights(GgmlType::kQ8_0, 64, 8, 9);
  const std::vector<float> x = MakeActivations(5, 64, 10);
  std::vector<float> y(5 * 8);
  EXPECT_THROW(MatMul(w.View(), x.data(), 5, y.data(), scratch, pool), Error);
  EXPECT_NO_THROW(MatMul(w.View(), x.data(), 4, y.data(), scratch, pool));
  const TestWeights wide = MakeWeights(GgmlType::kQ8_0, 96, 8, 11);
  const std::vector<float> x96 = MakeActivations(1, 96, 12);
  EXPECT_THROW(MatMul(wide.View(), x96.data(), 1, y.data(), scratch, pool), Error);
  WeightView iq2 = w.View();
  iq2.type = GgmlType::kIQ2_XXS;  // no kernel takes it
  EXPECT_THROW(MatMul(iq2, x.data(), 1, y.data(), scratch, pool), Error);
}

// Regrouping is lossless: every byte of the GGUF rows comes back, for a whole group, a last
// partial group, and a width with an odd number of blocks; padding rows have scale 0.
TEST(GroupLayoutTest, PackThenUnpackRestoresTheRows) {
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kF16}) {
    for (int64_t n_in : Widths(type, {32, 96, 2048})) {
      const TestWeights w = MakeWeights(type, n_in, 37, 3);  // groups of 16, 16, 5 rows
      ASSERT_EQ(w.grouped_bytes.size(), 3 * GroupBytes(type, n_in));
      ASSERT_EQ(GroupBytes(type, n_in), kGroupRows * w.row_bytes);
      std::vector<uint8_t> back(w.bytes.size(), 0xee);
      for (int64_t g = 0; g < 3; ++g) {
        const int n = static_cast<int>(std::min<int64_t>(16, 37 - g * 16));
        UnpackRowGroup(type, w.grouped_bytes.data() + g * GroupBytes(type, n_in), n, n_in,
                       back.data() + g * 16 * w.row_bytes, w.row_bytes);
      }
      EXPECT_EQ(back, w.bytes) << GgmlTypeName(type) << " n_in=" << n_in;
      // The 11 padding rows of the last group: unpacked, they are zero-scale blocks.
      std::vector<uint8_t> last(16 * w.row_bytes);
      UnpackRowGroup(type, w.grouped_bytes.data() + 2 * GroupBytes(type, n_in), 16, n_in,
                     last.data(), w.row_bytes);
      std::vector<float> values(n_in);
      for (int j = 5; j < 16; ++j) {
        DequantizeRow(type, last.data() + j * w.row_bytes, values.data(), n_in);
        EXPECT_EQ(values, std::vector<float>(n_in, 0.0f)) << GgmlTypeName(type) << " row " << j;
      }
    }
  }
  EXPECT_FALSE(HasGroupLayout(GgmlType::kQ6_K));
  EXPECT_FALSE(HasGroupLayout(GgmlType::kBF16));
}

// The grouped activation format holds the scalar level's quants in natural order, its scales, and
// the negated exact block sums.
TEST(GroupLayoutTest, GroupedActivationsHoldTheScalarQuants) {
  for (const KernelSet* k : AvailableKernelLevels()) {
    if (k->quantize_act_grouped == nullptr) continue;
    for (int64_t n_in : {32, 96, 4096}) {
      const std::vector<float> x = MakeActivations(1, n_in, 40);
      std::vector<uint8_t> want(ActQ8RowBytes(n_in)), got(ActQ8RowBytes(n_in));
      AvailableKernelLevels()[0]->quantize_act(x.data(), n_in, want.data());
      k->quantize_act_grouped(x.data(), n_in, got.data());
      ASSERT_TRUE(std::equal(want.begin(), want.begin() + n_in, got.begin())) << k->name;
      const auto* want_scales =
          reinterpret_cast<const float*>(want.data() + ActQ8ScaleOffset(n_in));
      const auto* got_scales = reinterpret_cast<const float*>(got.data() + ActQ8ScaleOffset(n_in));
      const auto* neg_sums = reinterpret_cast<const int32_t*>(got.data() + ActQ8SumOffset(n_in));
      for (int64_t b = 0; b < n_in / 32; ++b) {
        int32_t sum = 0;
        for (int j = 0; j < 32; ++j) sum += static_cast<int8_t>(want[b * 32 + j]);
        ASSERT_EQ(got_scales[b], want_scales[b]) << k->name << " block " << b;
        ASSERT_EQ(neg_sums[b], -sum) << k->name << " block " << b;
      }
    }
  }
}

// A grouped matrix fused with others (Q, K, V; gate, up) gives the bits of separate calls, and
// it cannot share a call with rows, whose activations have another format.
TEST(GroupLayoutTest, FusedGroupedMatMulsEqualSeparateCalls) {
  const TestWeights probe = MakeWeights(GgmlType::kQ8_0, 160, 16, 1);
  if (!CanGroup(ActiveKernels(), probe.View())) {
    GTEST_SKIP() << "the active kernels (" << ActiveKernels().name << ") have no group kernels";
  }
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K}) {
    const int64_t n_in = IsKQuant(type) ? 512 : 160;
    const TestWeights a = MakeWeights(type, n_in, 67, 21);
    const TestWeights b = MakeWeights(type, n_in, 13, 22);
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      MatMulScratch scratch(16, n_in);
      for (int n_rows : {1, 9}) {
        const std::vector<float> x = MakeActivations(n_rows, n_in, 23);
        std::vector<float> want_a(n_rows * 67), want_b(n_rows * 13);
        MatMul(a.grouped, x.data(), n_rows, want_a.data(), scratch, pool);
        MatMul(b.grouped, x.data(), n_rows, want_b.data(), scratch, pool);
        std::vector<float> got_a(want_a.size()), got_b(want_b.size());
        const MatMulOutput both[] = {{a.grouped, got_a.data()}, {b.grouped, got_b.data()}};
        ASSERT_TRUE(CanFuseMatMuls(both));
        MatMulFused(both, x.data(), n_rows, scratch, pool);
        EXPECT_EQ(got_a, want_a) << GgmlTypeName(type) << " threads " << threads;
        EXPECT_EQ(got_b, want_b) << GgmlTypeName(type) << " threads " << threads;
      }
    }
    EXPECT_FALSE(
        CanFuseMatMuls(std::vector<MatMulOutput>{{a.grouped, nullptr}, {a.View(), nullptr}}));
  }
}

TEST(GroupLayoutTest, LevelsWithoutGroupKernelsRefuseGroupedWeights) {
  const TestWeights w = MakeWeights(GgmlType::kQ8_0, 64, 16, 5);
  WeightView grouped = w.View();
  grouped.grouped = true;
  ThreadPool pool(1);
  MatMulScratch scratch(1, 64);
  const std::vector<float> x = MakeActivations(1, 64, 6);
  std::vector<float> y(16);
  EXPECT_FALSE(CanGroup(*KernelsForLevel(KernelLevel::kScalar), w.View()));
  EXPECT_THROW(MatMulWithKernels(*KernelsForLevel(KernelLevel::kScalar), grouped, x.data(), 1,
                                 y.data(), scratch, pool),
               Error);
}

TEST(KernelSetTest, ActiveLevelFollowsCpuAndEnvironment) {
  const KernelSet& active = ActiveKernels();
  EXPECT_NE(KernelsForLevel(active.level), nullptr);
  EXPECT_EQ(&ActiveKernels(), &active);  // chosen once
  ASSERT_NE(KernelsForLevel(KernelLevel::kScalar), nullptr);
  KernelLevel expected = BestKernelLevel();
  if (const char* env = std::getenv("GROVE_KERNELS")) {
    const std::string cap = env;
    for (KernelLevel level : {KernelLevel::kScalar, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
      if (cap == KernelLevelName(level)) expected = std::min(expected, level);
    }
  }
  EXPECT_EQ(active.level, expected);
  EXPECT_FALSE(CpuFeatureString(HostCpuFeatures()).empty());
  std::printf("kernels: %s (cpu: %s)\n", active.name, CpuFeatureString(HostCpuFeatures()).c_str());
}

}  // namespace
}  // namespace grove
