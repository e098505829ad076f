// MatMul throughput in GB/s of weights streamed, the number that bounds decode speed
// (tokens/s <= bandwidth / bytes of weights).
//
// Each benchmark cycles through enough copies of the weight matrix to exceed the last-level cache
// (kStreamBytes), so the weights come from DRAM as they do when decoding a real model; the same
// matrix over and over would measure L3 instead.
//
//   matmul_bench --benchmark_filter='Q8_0/2048x2048' --benchmark_repetitions=5
//   GROVE_KERNELS=avx2 matmul_bench ...   (compare kernel levels)
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/kernel_set.h"
#include "ops/matmul.h"
#include "quant/quant.h"

namespace grove {
namespace {

constexpr int64_t kStreamBytes = int64_t{256} << 20;  // well above any desktop/server L3 slice

struct WeightCopies {
  std::vector<std::vector<uint8_t>> copies;
  WeightView view;
};

// Rows as GGUF stores them, or regrouped for the group kernels (what a model does at load).
WeightCopies MakeCopies(GgmlType type, int64_t n_out, int64_t n_in, bool grouped,
                        ThreadPool& pool) {
  WeightCopies w;
  const int64_t row_bytes = GgmlRowBytes(type, n_in);
  std::vector<uint8_t> bytes(row_bytes * n_out);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> row(n_in);
  for (int64_t o = 0; o < n_out; ++o) {
    for (float& v : row) v = normal(rng);
    QuantizeRow(type, row.data(), bytes.data() + o * row_bytes, n_in);
  }
  w.view = {type, bytes.data(), n_in, n_out, row_bytes};
  if (grouped) {
    std::vector<uint8_t> packed(GroupedMatrixBytes(w.view));
    w.view = PackMatrix(w.view, packed.data(), pool);
    bytes = std::move(packed);
  }
  const int64_t n_copies = std::max<int64_t>(2, kStreamBytes / static_cast<int64_t>(bytes.size()));
  w.copies.assign(n_copies, bytes);
  return w;
}

// Args: n_out, n_in, n_rows, threads.
void BM_MatMul(benchmark::State& state, GgmlType type, bool grouped) {
  const int64_t n_out = state.range(0), n_in = state.range(1);
  const int n_rows = static_cast<int>(state.range(2));
  ThreadPool pool(static_cast<int>(state.range(3)));
  if (grouped && !CanGroup(ActiveKernels(), {type, nullptr, n_in, n_out, 0})) {
    state.SkipWithError("no group kernel at this kernel level");
    return;
  }
  WeightCopies w = MakeCopies(type, n_out, n_in, grouped, pool);
  MatMulScratch scratch(n_rows, n_in);
  std::vector<float> x(n_rows * n_in, 0.5f), y(n_rows * n_out);
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i)
    x[i] = static_cast<float>(i % 17) - 8;
  size_t next = 0;
  for (auto _ : state) {
    WeightView view = w.view;
    view.data = w.copies[next].data();
    next = (next + 1) % w.copies.size();
    MatMul(view, x.data(), n_rows, y.data(), scratch, pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double weight_bytes = static_cast<double>(w.view.row_bytes * n_out);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * weight_bytes));
  state.counters["GMAC/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * n_rows * n_in * n_out / 1e9,
                         benchmark::Counter::kIsRate);
  state.SetLabel(ActiveKernels().name);
}

void Shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n_out", "n_in", "rows", "threads"});
  for (int64_t threads : {1, 2}) {
    for (auto [n_out, n_in] :
         {std::pair<int64_t, int64_t>{2048, 2048}, {5632, 2048}, {2048, 5632}}) {
      for (int64_t rows : {1, 8, 16, 64}) b->Args({n_out, n_in, rows, threads});
    }
  }
  b->UseRealTime();
}

BENCHMARK_CAPTURE(BM_MatMul, Q8_0, GgmlType::kQ8_0, false)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, Q8_0_grouped, GgmlType::kQ8_0, true)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, Q4_0, GgmlType::kQ4_0, false)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, Q4_0_grouped, GgmlType::kQ4_0, true)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, IQ4_NL, GgmlType::kIQ4_NL, false)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, MXFP4, GgmlType::kMXFP4, false)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, Q4_K, GgmlType::kQ4_K, false)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, Q6_K, GgmlType::kQ6_K, false)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, F16, GgmlType::kF16, false)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, F16_grouped, GgmlType::kF16, true)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, Q4_K_grouped, GgmlType::kQ4_K, true)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, BF16, GgmlType::kBF16, false)->Apply(Shapes);

}  // namespace
}  // namespace grove

BENCHMARK_MAIN();
