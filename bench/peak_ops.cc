// The arithmetic peak grove's batched forward is measured against (issue 31): how many fp32
// multiply-adds (the F16 and float kernels' instruction) and int8 dot-product operations (the
// quantized kernels': VNNI vpdpbusd, or AVX2's vpmaddubsw + vpmaddwd) the cores retire per second,
// each thread running 12 independent chains of the widest instruction the compiler was allowed
// (-march=native), nothing read from memory. Built with the benchmarks
// (build/release/bench/peak_ops) and run by scripts/compare-shapes.sh.
//
//   build/release/bench/peak_ops 1 2
//
// Prints one line per thread count: "threads N: fp32 G GFLOP/s, int8 G GOP/s" (an FMA counts
// two operations, an int8 multiply-add two), the median of 3 runs.
#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "base/median.h"

namespace {

constexpr int kChains = 12;  // independent accumulators: more than latency x throughput
constexpr long kSteps = 20'000'000;

#if defined(__AVX512F__)
using FloatVec = __m512;
constexpr int kFloatLanes = 16;
FloatVec Fma(FloatVec a, FloatVec x, FloatVec y) { return _mm512_fmadd_ps(a, x, y); }
FloatVec FloatSplat(float v) { return _mm512_set1_ps(v); }

#else
using FloatVec = __m256;
constexpr int kFloatLanes = 8;
FloatVec Fma(FloatVec a, FloatVec x, FloatVec y) { return _mm256_fmadd_ps(a, x, y); }
FloatVec FloatSplat(float v) { return _mm256_set1_ps(v); }

#endif

#if defined(__AVX512VNNI__)
using IntVec = __m512i;
constexpr int kInt8PerStep = 64;  // vpdpbusd zmm: 64 u8 x s8 products summed into 16 lanes
IntVec Dot(IntVec a, IntVec x, IntVec y) { return _mm512_dpbusd_epi32(a, x, y); }
IntVec IntSplat(int v) { return _mm512_set1_epi8(static_cast<char>(v)); }

#else
using IntVec = __m256i;
constexpr int kInt8PerStep = 32;  // vpmaddubsw + vpmaddwd + vpaddd on ymm: 32 products
IntVec Dot(IntVec a, IntVec x, IntVec y) {
  const __m256i pairs = _mm256_maddubs_epi16(x, y);
  return _mm256_add_epi32(a, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}
IntVec IntSplat(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }

#endif

// The sum of a register's lanes (not _mm512_reduce_add_ps: GCC 12 warns inside it).
template <typename T, typename V>
T SumLanes(V v) {
  T lanes[sizeof(V) / sizeof(T)];
  std::memcpy(lanes, &v, sizeof(v));
  T sum = 0;
  for (T x : lanes) sum += x;
  return sum;
}

// kChains independent chains a = step(a, x, y), `steps` times each; returns the sum of their
// lanes, so that none is optimised away.
template <typename T, typename Vec, typename Step>
T Chains(long steps, Vec x, Vec y, Step step) {
  Vec a[kChains];
  for (Vec& chain : a) chain = y;
  for (long s = 0; s < steps; ++s) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) a[i] = step(a[i], x, y);
  }
  T sum = 0;
  for (const Vec& chain : a) sum += SumLanes<T>(chain);
  return sum;
}

__attribute__((noinline)) float FmaChains(long steps) {
  return Chains<float>(steps, FloatSplat(1.0000001f), FloatSplat(1e-7f),
                       [](FloatVec a, FloatVec x, FloatVec y) { return Fma(a, x, y); });
}

__attribute__((noinline)) int DotChains(long steps) {
  return Chains<int>(steps, IntSplat(3), IntSplat(5),
                     [](IntVec a, IntVec x, IntVec y) { return Dot(a, x, y); });
}

// Seconds for `threads` threads each running f once.
template <typename F>
double TimeThreads(int threads, F f) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) running.emplace_back(f);
  for (std::thread& t : running) t.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  volatile float float_sink = 0;
  volatile int int_sink = 0;
  FmaChains(kSteps / 20);  // clocks up
  for (int a = 1; a < std::max(argc, 2); ++a) {
    const int threads = argc > 1 ? std::atoi(argv[a]) : 1;
    if (threads < 1) {
      std::fprintf(stderr, "usage: %s THREADS...\n", argv[0]);
      return 1;
    }
    std::vector<double> fma, dot;
    for (int rep = 0; rep < 3; ++rep) {
      fma.push_back(TimeThreads(threads, [&] { float_sink = FmaChains(kSteps); }));
      dot.push_back(TimeThreads(threads, [&] { int_sink = DotChains(kSteps); }));
    }
    const double steps = static_cast<double>(kSteps) * kChains * threads;
    std::printf("threads %d: fp32 %.1f GFLOP/s, int8 %.1f GOP/s\n", threads,
                steps * kFloatLanes * 2 / grove::Median(fma) / 1e9,
                steps * kInt8PerStep * 2 / grove::Median(dot) / 1e9);
  }
  return 0;
}
#else
#include <cstdio>

// A machine without AVX2 and FMA: grove's scalar kernels, whose peak this does not measure.
int main() {
  std::fprintf(stderr, "peak_ops: measures AVX2/AVX-512 machines only\n");
  return 1;
}
#endif
