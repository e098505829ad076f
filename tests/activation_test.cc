// The element-wise and row-wise kernels of the forward pass at every level: SwiGLU's silu(g) * u
// and RMSNorm's sum of squares, against double-precision references over awkward lengths (tails
// of every size, lengths below one vector), with explicit error bounds.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/kernel_set.h"
#include "ops/activation.h"
#include "ops/norm.h"
#include "test_support.h"

namespace grove {
namespace {

using testing::AvailableKernelLevels;

std::vector<float> Random(std::size_t n, uint32_t seed, float scale) {
  return testing::RandomNormal(n, seed, scale);
}

constexpr int64_t kLengths[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1024, 1027};

TEST(ActivationKernels, SiluMulMatchesDoubleReference) {
  for (const KernelSet* k : AvailableKernelLevels()) {
    for (int64_t n : kLengths) {
      std::vector<float> gate = Random(n, static_cast<uint32_t>(n), 6.0f);
      const std::vector<float> up = Random(n, static_cast<uint32_t>(n) + 1, 1.0f);
      // Extremes: large negative (exp(-g) would overflow in the naive form), large positive, zeros.
      gate[0] = -100.0f;
      if (n > 1) gate[1] = 90.0f;
      if (n > 2) gate[2] = -0.0f;
      std::vector<float> out(n);
      k->silu_mul(gate.data(), up.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double g = gate[i];
        const double want = g / (1.0 + std::exp(-g)) * up[i];
        // exp's polynomial (2e-7), one divide and two multiplies: a few float ulps.
        ASSERT_NEAR(out[i], want, 1e-6 * std::fabs(want) + 1e-30)
            << k->name << " n " << n << " i " << i;
      }
      // In place (out = gate), as the forward pass calls it.
      std::vector<float> in_place = gate;
      k->silu_mul(in_place.data(), up.data(), in_place.data(), n);
      EXPECT_EQ(in_place, out) << k->name;
    }
  }
}

TEST(ActivationKernels, SumSquaresMatchesLongDoubleReference) {
  for (const KernelSet* k : AvailableKernelLevels()) {
    for (int64_t n : kLengths) {
      // Read at an odd offset too: unaligned rows give the same sum.
      std::vector<float> x = Random(n + 1, static_cast<uint32_t>(3 * n), 3.0f);
      long double want = 0;
      for (int64_t i = 1; i <= n; ++i) want += static_cast<long double>(x[i]) * x[i];
      const double got = k->sum_squares(x.data() + 1, n);
      EXPECT_NEAR(got, static_cast<double>(want), 1e-14 * static_cast<double>(want))
          << k->name << " n " << n;
      std::vector<float> copy(x.begin() + 1, x.end());
      EXPECT_EQ(k->sum_squares(copy.data(), n), got)
          << k->name << ": the sum depends on the address";
    }
  }
}

TEST(ActivationKernels, IndicesAboveListsEveryPassingIndexInOrder) {
  for (const KernelSet* k : AvailableKernelLevels()) {
    for (int64_t n : kLengths) {
      const std::vector<float> x = Random(n, static_cast<uint32_t>(7 * n), 1.0f);
      for (float threshold : {-10.0f, 0.0f, 0.7f, 10.0f}) {
        std::vector<int32_t> want;
        for (int32_t i = 0; i < n; ++i) {
          if (x[i] > threshold) want.push_back(i);
        }
        std::vector<int32_t> got(n + 16, -1);
        got.resize(k->indices_above(x.data(), static_cast<int32_t>(n), threshold, got.data()));
        EXPECT_EQ(got, want) << k->name << " n " << n << " threshold " << threshold;
      }
    }
  }
}

TEST(ActivationKernels, SumExpMatchesDoubleReference) {
  for (const KernelSet* k : AvailableKernelLevels()) {
    for (int64_t n : kLengths) {
      std::vector<float> x = Random(n, static_cast<uint32_t>(5 * n), 4.0f);
      if (n > 1) x[0] = -std::numeric_limits<float>::infinity();  // a token nobody proposes
      float max = -std::numeric_limits<float>::infinity();
      for (float v : x) max = std::max(max, v);
      double want = 0;
      for (float v : x) want += std::exp(static_cast<double>(v) - max);
      const std::vector<float> before = x;
      const float got = k->sum_exp(x.data(), static_cast<int32_t>(n), max);
      EXPECT_NEAR(got, want, 2e-6 * want) << k->name << " n " << n;
      EXPECT_EQ(x, before) << k->name << ": the input must not change";
    }
  }
}

// RMSNorm and SwiGLU through the ops layer (the active level), against references.
TEST(ActivationKernels, OpsUseTheKernels) {
  const int64_t n = 384;
  const std::vector<float> x = Random(n, 5, 2.0f), w = Random(n, 6, 1.0f);
  std::vector<float> out(n);
  RmsNorm(x.data(), w.data(), out.data(), n, 1e-5f);
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(out[i], x[i] * scale * w[i], 1e-5 * std::fabs(x[i] * scale * w[i]) + 1e-7);
  SwiGlu(x.data(), w.data(), out.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double want = x[i] / (1.0 + std::exp(-static_cast<double>(x[i]))) * w[i];
    ASSERT_NEAR(out[i], want, 1e-6 * std::fabs(want) + 1e-30);
  }
}

}  // namespace
}  // namespace grove
