// Attention of one head at every kernel level: against a double-precision reference, and the
// contract that a token's result does not depend on whether its keys sit in the committed prefix
// or arrive as extra (tree) slots.
#include "ops/attention.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/kernel_set.h"
#include "quant/half.h"
#include "test_support.h"

namespace grove {
namespace {

using testing::AvailableKernelLevels;

std::vector<float> Random(std::size_t n, uint32_t seed, float scale) {
  return testing::RandomNormal(n, seed, scale);
}

// Slots of head_dim floats, stride floats apart (as the KV cache holds one head's group).
struct Cache {
  int32_t head_dim;
  int64_t stride;
  std::vector<float> keys, values;
};

Cache MakeCache(int32_t n_slots, int32_t head_dim, uint32_t seed) {
  const int64_t stride = head_dim + 3;  // not a multiple of the vector width
  return {head_dim, stride, Random(n_slots * stride, seed, 1.0f),
          Random(n_slots * stride, seed + 1, 1.0f)};
}

std::vector<float> Attend(const KernelSet& k, const Cache& c, const std::vector<float>& q,
                          int32_t n_prefix, std::span<const int32_t> extra) {
  std::vector<float> scores(n_prefix + extra.size()), out(c.head_dim);
  const AttentionInput in{
      q.data(), c.keys.data(), c.values.data(), c.stride,
      n_prefix, extra,         c.head_dim,      1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  AttendHeadWithKernels(k, in, scores.data(), out.data());
  return out;
}

// n_q queries, q_stride floats apart in q (their outputs likewise in out), over the cache's first
// n_prefix slots and each query's extra slots.
QueryGroup GroupOver(const Cache& c, const std::vector<float>& q, int64_t q_stride, int32_t n_q,
                     int32_t n_prefix, const int32_t* extra_begin, const int32_t* extra,
                     float* out) {
  return {.q = q.data(),
          .q_stride = q_stride,
          .n_q = n_q,
          .keys = c.keys.data(),
          .values = c.values.data(),
          .row_stride = c.stride,
          .n_prefix = n_prefix,
          .extra_begin = extra_begin,
          .extra = extra,
          .head_dim = c.head_dim,
          .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
          .out = out,
          .out_stride = q_stride};
}

TEST(AttentionTest, EveryLevelMatchesDoubleReference) {
  for (int32_t head_dim : {8, 32, 64, 100, 128, 256}) {
    for (int32_t n : {1, 7, 16, 17, 40, 300}) {
      const Cache c = MakeCache(n, head_dim, static_cast<uint32_t>(head_dim * 1000 + n));
      // Scaled queries make some softmaxes sharp (scores spread over tens of units).
      const std::vector<float> q = Random(head_dim, n, n % 2 ? 4.0f : 0.5f);
      const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
      std::vector<double> s(n), want(head_dim, 0.0);
      double max = -INFINITY, sum = 0;
      for (int32_t j = 0; j < n; ++j) {
        s[j] = 0;
        for (int32_t d = 0; d < head_dim; ++d) s[j] += double{q[d]} * c.keys[j * c.stride + d];
        s[j] *= scale;
        max = std::max(max, s[j]);
      }
      for (int32_t j = 0; j < n; ++j) sum += s[j] = std::exp(s[j] - max);
      for (int32_t j = 0; j < n; ++j) {
        for (int32_t d = 0; d < head_dim; ++d) want[d] += s[j] / sum * c.values[j * c.stride + d];
      }
      for (const KernelSet* k : AvailableKernelLevels()) {
        const std::vector<float> got = Attend(*k, c, q, n, {});
        for (int32_t d = 0; d < head_dim; ++d) {
          // Outputs are convex combinations of values of magnitude ~1: absolute error.
          ASSERT_NEAR(got[d], want[d], 2e-5 * (1 + std::sqrt(static_cast<double>(n))))
              << k->name << " head_dim " << head_dim << " n " << n << " d " << d;
        }
      }
    }
  }
}

// A sink (gpt-oss): one more logit in the softmax's denominator with no value, so the weights
// sum to less than one. Against a double reference, with sinks below, among and above the scores
// (the last makes the sink the softmax's maximum); and a query group gives each query the bits it
// gets alone.
TEST(AttentionTest, SinkJoinsTheSoftmaxWithoutAValue) {
  for (int32_t n : {1, 9, 40}) {
    const int32_t head_dim = 64;
    const Cache c = MakeCache(n, head_dim, static_cast<uint32_t>(500 + n));
    const std::vector<float> q = Random(head_dim, 600 + n, 2.0f);
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    for (const float sink : {-20.0f, 0.5f, 30.0f}) {
      std::vector<double> s(n), want(head_dim, 0.0);
      double max = sink;
      for (int32_t j = 0; j < n; ++j) {
        s[j] = 0;
        for (int32_t d = 0; d < head_dim; ++d) s[j] += double{q[d]} * c.keys[j * c.stride + d];
        max = std::max(max, s[j] *= scale);
      }
      double sum = std::exp(sink - max);
      for (int32_t j = 0; j < n; ++j) sum += s[j] = std::exp(s[j] - max);
      for (int32_t j = 0; j < n; ++j) {
        for (int32_t d = 0; d < head_dim; ++d) want[d] += s[j] / sum * c.values[j * c.stride + d];
      }
      for (const KernelSet* k : AvailableKernelLevels()) {
        std::vector<float> scores(n + 1), alone(head_dim);
        AttentionInput in{q.data(), c.keys.data(), c.values.data(),          c.stride, n,
                          {},       head_dim,      static_cast<float>(scale)};
        in.sink = &sink;
        AttendHeadWithKernels(*k, in, scores.data(), alone.data());
        for (int32_t d = 0; d < head_dim; ++d) {
          ASSERT_NEAR(alone[d], want[d], 2e-5 * (1 + std::sqrt(static_cast<double>(n))))
              << k->name << " n " << n << " sink " << sink << " d " << d;
        }
        const int32_t extra_begin[] = {0, 0, 0};
        std::vector<float> out(2 * head_dim), group_scores(2 * (n + 2));
        const std::vector<float> q2 = [&] {
          std::vector<float> v = q;
          v.insert(v.end(), q.begin(), q.end());
          return v;
        }();
        QueryGroup g = GroupOver(c, q2, head_dim, 2, n, extra_begin, nullptr, out.data());
        g.sink = &sink;
        AttendQueriesWithKernels(*k, g, group_scores.data());
        for (int32_t i = 0; i < 2; ++i) {
          EXPECT_EQ(
              std::vector<float>(out.begin() + i * head_dim, out.begin() + (i + 1) * head_dim),
              alone)
              << k->name << " n " << n << " sink " << sink << " query " << i;
        }
      }
    }
  }
}

// The same 40 keys as a prefix of 40, a prefix of 33 plus 7 extra slots, or a prefix of 30 plus
// scattered extra slots whose keys were copied behind the prefix (what committing a tree path
// does): bit-identical outputs at every level.
TEST(AttentionTest, PrefixOrExtraSlotsGiveIdenticalBits) {
  for (int32_t head_dim : {8, 64, 100}) {
    const Cache c = MakeCache(40, head_dim, 7);
    const std::vector<float> q = Random(head_dim, 8, 2.0f);
    const std::vector<int32_t> tail = {33, 34, 35, 36, 37, 38, 39};
    const std::vector<int32_t> scattered = {31, 34, 38};
    Cache compact = c;
    for (int32_t e = 0; e < 3; ++e) {
      for (int32_t d = 0; d < head_dim; ++d) {
        compact.keys[(30 + e) * c.stride + d] = c.keys[scattered[e] * c.stride + d];
        compact.values[(30 + e) * c.stride + d] = c.values[scattered[e] * c.stride + d];
      }
    }
    for (const KernelSet* k : AvailableKernelLevels()) {
      const std::vector<float> whole = Attend(*k, c, q, 40, {});
      EXPECT_EQ(Attend(*k, c, q, 33, tail), whole) << k->name << " head_dim " << head_dim;
      EXPECT_EQ(Attend(*k, c, q, 30, scattered), Attend(*k, compact, q, 33, {}))
          << k->name << " head_dim " << head_dim;
    }
  }
}

// A group of queries sharing a prefix (blocked over keys, ops/attention.h) gives every query the
// bits AttendHead gives it alone, at every level: prefixes shorter and longer than a key block,
// each query with its own extra slots (none, one, several), as a prompt chunk's (one run of slots
// each, read in blocks like the prefix) or as a tree's (scattered: query by query).
TEST(AttentionTest, QueryGroupMatchesEachQueryAloneBitForBit) {
  for (const bool scattered : {false, true}) {
    for (int32_t head_dim : {8, 64, 100}) {
      for (int32_t n_prefix : {1, 5, 32, 33, 130}) {
        const int32_t n_slots = n_prefix + 2 * 40;
        const Cache c = MakeCache(n_slots, head_dim, static_cast<uint32_t>(n_prefix));
        const int32_t n_q = 5;
        const int64_t q_stride = head_dim * 3 + 1;  // other heads' queries lie between
        const std::vector<float> q = Random(n_q * q_stride, 9, 2.0f);
        // Query i sees 8 i extra slots from n_prefix on: all of them (a chunk's earlier tokens,
        // runs longer than a key block) or, scattered, every other one.
        std::vector<int32_t> extra, extra_begin = {0};
        for (int32_t i = 0; i < n_q; ++i) {
          for (int32_t e = 0; e < 8 * i; ++e) extra.push_back(n_prefix + (scattered ? 2 * e : e));
          extra_begin.push_back(static_cast<int32_t>(extra.size()));
        }
        for (const KernelSet* k : AvailableKernelLevels()) {
          std::vector<float> out(n_q * q_stride, -7.0f);
          std::vector<float> scores(n_q * (n_slots + 1));
          const QueryGroup g = GroupOver(c, q, q_stride, n_q, n_prefix, extra_begin.data(),
                                         extra.data(), out.data());
          AttendQueriesWithKernels(*k, g, scores.data());
          for (int32_t i = 0; i < n_q; ++i) {
            const std::vector<float> qi(q.begin() + i * q_stride,
                                        q.begin() + i * q_stride + head_dim);
            const std::vector<float> alone =
                Attend(*k, c, qi, n_prefix,
                       std::span<const int32_t>(extra.data() + extra_begin[i], 8 * i));
            const std::vector<float> got(out.begin() + i * q_stride,
                                         out.begin() + i * q_stride + head_dim);
            EXPECT_EQ(got, alone) << k->name << " head_dim " << head_dim << " prefix " << n_prefix
                                  << " query " << i << (scattered ? " scattered" : " runs");
            EXPECT_EQ(out[i * q_stride + head_dim], -7.0f) << "wrote past its head";
          }
        }
      }
    }
  }
}

// A sliding window: each query of the group starts at its own prefix slot (some at the same one,
// inside a key block or at its edge), and still gets AttendHead's bits over just its keys, at
// every level.
TEST(AttentionTest, QueryGroupWithAWindowMatchesEachQueryAloneBitForBit) {
  for (int32_t head_dim : {8, 64, 100}) {
    const int32_t n_prefix = 90;
    const Cache c = MakeCache(n_prefix, head_dim, 11);
    const int32_t n_q = 7;
    const std::vector<float> q = Random(n_q * head_dim, 12, 2.0f);
    // Starts shared and not, inside a key block and at its edge.
    const std::vector<int32_t> begin = {0, 0, 5, 37, 40, 40, 64};
    const std::vector<int32_t> extra_begin(n_q + 1, 0);  // no extra slots
    for (const KernelSet* k : AvailableKernelLevels()) {
      std::vector<float> out(n_q * head_dim);
      std::vector<float> scores(n_q * (n_prefix + 1));
      QueryGroup g =
          GroupOver(c, q, head_dim, n_q, n_prefix, extra_begin.data(), nullptr, out.data());
      g.prefix_begin = begin.data();
      g.extra_first = extra_begin.data();
      AttendQueriesWithKernels(*k, g, scores.data());
      for (int32_t i = 0; i < n_q; ++i) {
        Cache window = c;
        window.keys.erase(window.keys.begin(), window.keys.begin() + begin[i] * c.stride);
        window.values.erase(window.values.begin(), window.values.begin() + begin[i] * c.stride);
        const std::vector<float> qi(q.begin() + i * head_dim, q.begin() + (i + 1) * head_dim);
        const std::vector<float> alone = Attend(*k, window, qi, n_prefix - begin[i], {});
        EXPECT_EQ(std::vector<float>(out.begin() + i * head_dim, out.begin() + (i + 1) * head_dim),
                  alone)
            << k->name << " head_dim " << head_dim << " query " << i;
      }
    }
  }
}

// The exponential of the SIMD levels: relative error a few float ulps, exactly 0 far below the
// maximum, exactly 1 at it, and the returned sum is the sum of what was stored.
TEST(AttentionTest, SoftmaxExpIsAccurate) {
  std::vector<float> x;
  for (float v = -100.0f; v <= 0.0f; v += 0.0137f) x.push_back(v);
  x.push_back(0.0f);
  for (const KernelSet* k : AvailableKernelLevels()) {
    std::vector<float> e = x;
    const float sum = k->softmax_exp(e.data(), static_cast<int32_t>(e.size()));
    double want_sum = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double want = std::exp(static_cast<double>(x[i]));
      want_sum += want;
      if (x[i] < -87.3f) {
        EXPECT_LT(e[i], 1e-37f) << k->name << " x " << x[i];
      } else {
        ASSERT_NEAR(e[i], want, 4e-7 * want + 1e-44) << k->name << " x " << x[i];
      }
    }
    EXPECT_EQ(e.back(), 1.0f) << k->name;
    EXPECT_NEAR(sum, want_sum, 1e-5 * want_sum) << k->name;
  }
}

// An f16 cache's rows: random values rounded to half floats, and the same rows widened back to
// floats (exactly: every half is a float).
struct HalfCache {
  Cache widened;
  std::vector<uint16_t> keys, values;
};

HalfCache MakeHalfCache(int32_t n_slots, int32_t head_dim, uint32_t seed) {
  HalfCache h{MakeCache(n_slots, head_dim, seed), {}, {}};
  for (auto [floats, halves] :
       {std::pair{&h.widened.keys, &h.keys}, std::pair{&h.widened.values, &h.values}}) {
    for (float& x : *floats) {
      halves->push_back(Fp32ToFp16(x));
      x = Fp16ToFp32(halves->back());
    }
  }
  return h;
}

// The f16 kernels widen each key and value and then compute as the float ones: the same bits as
// the float kernels on the widened rows, at every level, for scores and weighted sums alike, over
// head sizes with and without a vector tail and key counts around every unrolling.
TEST(AttentionTest, HalfFloatKernelsGiveTheFloatBitsOfTheWidenedRows) {
  for (int32_t head_dim : {8, 48, 64, 100, 128, 256}) {
    for (int32_t n : {1, 3, 4, 7, 8, 9, 33}) {
      const HalfCache h = MakeHalfCache(n, head_dim, static_cast<uint32_t>(head_dim + 7 * n));
      const std::vector<float> q = Random(head_dim, 3, 2.0f);
      const std::vector<float> p = Random(n, 4, 1.0f);
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      for (const KernelSet* k : AvailableKernelLevels()) {
        std::vector<float> want(n), got(n);
        k->attn_scores(q.data(), h.widened.keys.data(), h.widened.stride, n, head_dim, scale,
                       want.data());
        k->attn_scores_f16(q.data(), h.keys.data(), h.widened.stride, n, head_dim, scale,
                           got.data());
        EXPECT_EQ(got, want) << k->name << " scores, head_dim " << head_dim << " n " << n;
        std::vector<float> want_sum = Random(head_dim, 5, 1.0f), got_sum = want_sum;
        k->attn_weighted_sum(p.data(), h.widened.values.data(), h.widened.stride, n, head_dim,
                             want_sum.data());
        k->attn_weighted_sum_f16(p.data(), h.values.data(), h.widened.stride, n, head_dim,
                                 got_sum.data());
        EXPECT_EQ(got_sum, want_sum) << k->name << " sums, head_dim " << head_dim << " n " << n;
      }
    }
  }
}

// A group of queries over an f16 cache (a tree's scattered extra slots) has the bits of the same
// group over the widened float rows.
TEST(AttentionTest, QueryGroupOverHalfFloatsMatchesTheWidenedFloats) {
  for (int32_t head_dim : {8, 64, 100}) {
    const int32_t n_prefix = 37, n_slots = n_prefix + 20, n_q = 4;
    const HalfCache h = MakeHalfCache(n_slots, head_dim, 21);
    const std::vector<float> q = Random(n_q * head_dim, 22, 2.0f);
    std::vector<int32_t> extra, extra_begin = {0};
    for (int32_t i = 0; i < n_q; ++i) {
      for (int32_t e = 0; e < 3 * i; ++e) extra.push_back(n_prefix + 2 * e);
      extra_begin.push_back(static_cast<int32_t>(extra.size()));
    }
    for (const KernelSet* k : AvailableKernelLevels()) {
      std::vector<float> want(n_q * head_dim), got(n_q * head_dim);
      std::vector<float> scores(n_q * (n_slots + 1));
      AttendQueriesWithKernels(*k,
                               GroupOver(h.widened, q, head_dim, n_q, n_prefix, extra_begin.data(),
                                         extra.data(), want.data()),
                               scores.data());
      QueryGroup g = GroupOver(h.widened, q, head_dim, n_q, n_prefix, extra_begin.data(),
                               extra.data(), got.data());
      g.keys = g.values = nullptr;
      g.keys_f16 = h.keys.data();
      g.values_f16 = h.values.data();
      AttendQueriesWithKernels(*k, g, scores.data());
      EXPECT_EQ(got, want) << k->name << " head_dim " << head_dim;
    }
  }
}

// The conversion an f16 cache writes with: Fp32ToFp16's halves at every level (round to nearest
// even, ties, subnormal halves, overflow to infinity, signed zeros), for lengths around every
// vector width.
TEST(AttentionTest, ToF16RoundsAsFp32ToFp16) {
  std::vector<float> x = testing::RandomNormal(1000, 31, 3.0f);
  for (float v : {0.0f, -0.0f, 1.0f, 65504.0f, 65519.0f, 65520.0f, -70000.0f, 1e-5f, -3e-7f,
                  5.9604645e-8f, 2.9802322e-8f, 2.98023259e-8f, 1.00048828125f, 1.00146484375f,
                  std::numeric_limits<float>::infinity(), 6.0975552e-5f, 6.1035156e-5f}) {
    x.push_back(v);
  }
  for (float& v : x) {
    if (&v - x.data() < 300) v *= 1e-4f;  // many subnormal halves
  }
  for (const KernelSet* k : AvailableKernelLevels()) {
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{15}, int64_t{16}, int64_t{17},
                      static_cast<int64_t>(x.size())}) {
      const int64_t offset = static_cast<int64_t>(x.size()) - n;  // the special values at the end
      std::vector<uint16_t> got(n + 1, 0xdead);
      k->to_f16(x.data() + offset, got.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], Fp32ToFp16(x[offset + i]))
            << k->name << " n " << n << " x " << x[offset + i];
      }
      EXPECT_EQ(got[n], 0xdead) << k->name << " wrote past n " << n;
    }
  }
}

}  // namespace
}  // namespace grove
