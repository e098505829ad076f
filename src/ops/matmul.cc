#include "ops/matmul.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/kernel_set.h"
#include "ops/parallel.h"
#include "quant/packed.h"

namespace grove {
namespace {

// Weight rows handled as one unit by one thread: every activation tile of a row block passes over
// these rows before the next chunk starts, so after the first tile the chunk is read from L1/L2
// (16 rows of 2048 Q8_0 weights = 35 KB) instead of DRAM. Decode (one tile) is unaffected.
// A chunk is one row group of a grouped matrix.
constexpr int64_t kOutChunk = 16;
static_assert(kOutChunk == kGroupRows);

// Activation rows per pass over the weights: 64 quantized rows of a 5632-wide input take 380 KB
// (64 float rows of 2048: 520 KB), within an L2 cache; larger batches (prompt processing) make
// several passes, each re-reading the weights, which costs little next to their 64 x n_in x n_out
// multiply-adds.
constexpr int kRowBlock = 64;

// Activation bytes one tile may sweep per weight row. A kernel call reads the whole of its rows for
// each weight row, so they must stay in L1 (32-48 KB) next to the streamed weights: up to 8 rows of
// 2048 quantized activations (2.3 KB each), 3 rows of 5632, or 2 float rows of 2048. Measured on
// Zen 5 (48 KB L1): 8-row tiles with 51 KB of activations ran 1.6x slower than 3-row tiles.
// The tile size never changes a result (see kernel_set.h).
constexpr int64_t kTileActBytes = 24 * 1024;

bool IsBlockQuantized(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kIQ4_NL:
    case GgmlType::kMXFP4:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
    case GgmlType::kIQ4_XS:
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
      return true;
    default:
      return false;
  }
}

// How a matrix wants its activations.
enum class ActFormat { kFloat, kQ8, kQ8Grouped };

ActFormat ActFormatOf(const WeightView& w) {
  if (!IsBlockQuantized(w.type)) return ActFormat::kFloat;
  return w.grouped ? ActFormat::kQ8Grouped : ActFormat::kQ8;
}

GroupKernelFn GroupKernelFor(const KernelSet& kernels, GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
      return kernels.group_q8_0;
    case GgmlType::kQ4_0:
      return kernels.group_q4_0;
    case GgmlType::kIQ4_NL:
      return kernels.group_iq4_nl;
    case GgmlType::kQ4_K:
      return kernels.group_q4_k;
    case GgmlType::kF16:
      return kernels.group_f16;
    default:
      return nullptr;
  }
}

int64_t ChunkCount(int64_t n_out) { return (n_out + kOutChunk - 1) / kOutChunk; }

RowKernelFn KernelFor(const KernelSet& kernels, GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return kernels.dot_f32;
    case GgmlType::kF16:
      return kernels.dot_f16;
    case GgmlType::kBF16:
      return kernels.dot_bf16;
    case GgmlType::kQ8_0:
      return kernels.dot_q8_0;
    case GgmlType::kQ4_0:
      return kernels.dot_q4_0;
    case GgmlType::kQ5_0:
      return kernels.dot_q5_0;
    case GgmlType::kIQ4_NL:
      return kernels.dot_iq4_nl;
    case GgmlType::kMXFP4:
      return kernels.dot_mxfp4;
    case GgmlType::kQ4_1:
      return kernels.dot_q4_1;
    case GgmlType::kQ5_1:
      return kernels.dot_q5_1;
    case GgmlType::kQ4_K:
      return kernels.dot_q4_k;
    case GgmlType::kQ5_K:
      return kernels.dot_q5_k;
    case GgmlType::kQ6_K:
      return kernels.dot_q6_k;
    case GgmlType::kIQ4_XS:
      return kernels.dot_iq4_xs;
    case GgmlType::kQ2_K:
      return kernels.dot_q2_k;
    case GgmlType::kQ3_K:
      return kernels.dot_q3_k;
    default:
      return nullptr;
  }
}

}  // namespace

MatMulScratch::MatMulScratch(int max_rows, int64_t max_n_in)
    : max_rows_(max_rows), max_n_in_(max_n_in) {
  GROVE_CHECK(max_rows >= 0 && max_n_in >= 0);
  // Either quantized rows or padded float rows (see MatMul). Both strides grow with n_in, so rows
  // of any n_in <= max_n_in fit.
  const int64_t padded_n_in = (max_n_in + 31) / 32 * 32;
  const int64_t row_bytes = std::max(ActQ8RowBytes(padded_n_in), FloatRowBytes(max_n_in));
  buffer_.Resize(static_cast<std::size_t>(max_rows * row_bytes));
}

namespace {

void CheckWeights(const KernelSet& kernels, const WeightView& w, int n_rows,
                  const MatMulScratch& scratch) {
  GROVE_CHECK(KernelFor(kernels, w.type) != nullptr, "matmul: unsupported weight type ",
              GgmlTypeName(w.type));
  GROVE_CHECK(!w.grouped || GroupKernelFor(kernels, w.type) != nullptr, "matmul: kernels ",
              kernels.name, " have no group kernel for grouped ", GgmlTypeName(w.type), " weights");
  GROVE_CHECK(n_rows >= 0 && n_rows <= scratch.max_rows(), "matmul: ", n_rows,
              " rows, scratch sized for ", scratch.max_rows());
  GROVE_CHECK(w.n_in <= scratch.max_n_in(), "matmul: n_in ", w.n_in, ", scratch sized for ",
              scratch.max_n_in());
  GROVE_CHECK(
      w.n_in % GgmlTraits(w.type).block_size == 0 && w.row_bytes >= GgmlRowBytes(w.type, w.n_in),
      "matmul: bad weight view ", w.n_out, "x", w.n_in, " ", GgmlTypeName(w.type), " with rows of ",
      w.row_bytes, " bytes");
}

// Activation rows as the kernels read them.
struct Activations {
  const void* data;
  int64_t stride;  // bytes
};

// Activations as the kernels read them: rows quantized to ActQ8 once per call (not once per
// weight row: that would redo the same work n_out times), or float rows. Float rows are copied to
// an odd cache-line stride when a tile has several of them: with the caller's power-of-two stride
// (n_in = 2048: 8 KiB) the rows of a tile collide in one L1 set. The copy is n_rows x n_in floats
// against n_rows x n_in x n_out multiply-adds.
Activations PrepareActivations(const KernelSet& kernels, ActFormat format, int64_t n_in,
                               const float* x, int n_rows, MatMulScratch& scratch,
                               ThreadPool& pool) {
  Activations act{x, n_in * static_cast<int64_t>(sizeof(float))};
  if (format == ActFormat::kFloat) {
    if (n_rows > 1 && act.stride % 128 == 0) {
      act = {scratch.bytes(), FloatRowBytes(n_in)};
      for (int r = 0; r < n_rows; ++r) {
        std::memcpy(scratch.bytes() + r * act.stride, x + r * n_in, n_in * sizeof(float));
      }
    }
    return act;
  }
  act = {scratch.bytes(), ActQ8RowBytes(n_in)};
  const QuantizeActFn quantize_act =
      format == ActFormat::kQ8Grouped ? kernels.quantize_act_grouped : kernels.quantize_act;
  auto quantize = [&](int64_t r_begin, int64_t r_end) {
    for (int64_t r = r_begin; r < r_end; ++r) {
      quantize_act(x + r * n_in, n_in, scratch.bytes() + r * act.stride);
    }
  };
  ParallelForWork(pool, n_rows, ElementwiseMacs(n_rows * n_in), quantize);
  return act;
}

// ComputeRange for one row (decode, a draft level): no rows to alias, so the kernels write y
// directly; only a group cut short by n_out goes through a buffer. The copies were 5% of a draft
// forward.
void ComputeRangeOfOneRow(RowKernelFn kernel, GroupKernelFn group_kernel, const WeightView& w,
                          const Activations& act, int64_t o_begin, int64_t o_end, float* y) {
  const auto* w_bytes = static_cast<const uint8_t*>(w.data);
  alignas(64) float chunk_out[kOutChunk];
  for (int64_t o_chunk = o_begin; o_chunk < o_end; o_chunk += kOutChunk) {
    const int64_t o_chunk_end = std::min(o_end, o_chunk + kOutChunk);
    if (group_kernel) {
      const bool whole = o_chunk_end - o_chunk == kOutChunk;
      group_kernel(w_bytes + o_chunk * w.row_bytes, w.n_in, act.data, act.stride, 1,
                   whole ? y + o_chunk : chunk_out, kOutChunk);
      if (!whole) std::memcpy(y + o_chunk, chunk_out, (o_chunk_end - o_chunk) * sizeof(float));
    } else {
      for (int64_t o = o_chunk; o < o_chunk_end; ++o) {
        kernel(w_bytes + o * w.row_bytes, w.n_in, act.data, act.stride, 1, y + o, kOutChunk);
      }
    }
  }
}

// Outputs [o_begin, o_end) of w for all n_rows rows, on the calling thread; o_begin is a multiple
// of kOutChunk. Each output is computed whole by one kernel call, whose accumulation order depends
// on n_in only, so neither the thread count, nor the output range, nor the tiling of rows changes
// a bit of the result.
void ComputeRange(const KernelSet& kernels, const WeightView& w, const Activations& act, int n_rows,
                  int64_t o_begin, int64_t o_end, float* y) {
  const RowKernelFn kernel = KernelFor(kernels, w.type);
  const GroupKernelFn group_kernel = w.grouped ? GroupKernelFor(kernels, w.type) : nullptr;
  if (n_rows == 1) {
    ComputeRangeOfOneRow(kernel, group_kernel, w, act, o_begin, o_end, y);
    return;
  }
  const auto* w_bytes = static_cast<const uint8_t*>(w.data);
  const int64_t n_in = w.n_in;
  const int64_t n_out = w.n_out;
  // A group kernel reads each activation row once per group of 16 weight rows (32 bytes per block
  // at a time), not once per weight row, so its tiles need not fit in L1.
  const int tile_rows =
      group_kernel
          ? kMaxTileRows
          : static_cast<int>(std::clamp<int64_t>(kTileActBytes / act.stride, 1, kMaxTileRows));
  // Kernels write a chunk's outputs here, 16 floats (one cache line) per row, and each row's
  // line is copied to y afterwards. Writing y directly stores to n_rows addresses n_out floats
  // apart, a power of two in every model (8 KiB for n_out = 2048), which alias in L1 and made
  // 8-row tiles 2.2x slower.
  alignas(64) float chunk_out[kRowBlock][kOutChunk];
  for (int r_block = 0; r_block < n_rows; r_block += kRowBlock) {
    const int r_block_end = std::min(n_rows, r_block + kRowBlock);
    for (int64_t o_chunk = o_begin; o_chunk < o_end; o_chunk += kOutChunk) {
      const int64_t o_chunk_end = std::min(o_end, o_chunk + kOutChunk);
      for (int r = r_block; r < r_block_end; r += tile_rows) {
        const int n_x = std::min(tile_rows, r_block_end - r);
        const auto* act_tile = static_cast<const uint8_t*>(act.data) + r * act.stride;
        if (group_kernel) {
          // The whole group is computed, padding rows included; only real rows are copied out.
          group_kernel(w_bytes + o_chunk * w.row_bytes, n_in, act_tile, act.stride, n_x,
                       chunk_out[r - r_block], kOutChunk);
        } else {
          for (int64_t o = o_chunk; o < o_chunk_end; ++o) {
            kernel(w_bytes + o * w.row_bytes, n_in, act_tile, act.stride, n_x,
                   &chunk_out[r - r_block][o - o_chunk], kOutChunk);
          }
        }
      }
      for (int r = r_block; r < r_block_end; ++r) {
        std::memcpy(y + r * n_out + o_chunk, chunk_out[r - r_block],
                    (o_chunk_end - o_chunk) * sizeof(float));
      }
    }
  }
}

// Outputs of chunks [c_begin, c_end) of a matrix, clipped to its n_out.
void ComputeChunks(const KernelSet& kernels, const WeightView& w, const Activations& act,
                   int n_rows, int64_t c_begin, int64_t c_end, float* y) {
  ComputeRange(kernels, w, act, n_rows, c_begin * kOutChunk, std::min(w.n_out, c_end * kOutChunk),
               y);
}

}  // namespace

void MatMul(const WeightView& w, const float* x, int n_rows, float* y, MatMulScratch& scratch,
            ThreadPool& pool) {
  MatMulWithKernels(ActiveKernels(), w, x, n_rows, y, scratch, pool);
}

void MatMulWithKernels(const KernelSet& kernels, const WeightView& w, const float* x, int n_rows,
                       float* y, MatMulScratch& scratch, ThreadPool& pool) {
  CheckWeights(kernels, w, n_rows, scratch);
  if (n_rows == 0 || w.n_out == 0) return;
  const Activations act =
      PrepareActivations(kernels, ActFormatOf(w), w.n_in, x, n_rows, scratch, pool);
  // Threads split the output rows in chunks, never k (see ComputeRange).
  const int64_t macs = n_rows * w.n_in * w.n_out;
  ParallelForWork(pool, ChunkCount(w.n_out), macs, [&](int64_t c_begin, int64_t c_end) {
    ComputeChunks(kernels, w, act, n_rows, c_begin, c_end, y);
  });
}

bool CanGroup(const KernelSet& kernels, const WeightView& w) {
  return !w.grouped && HasGroupLayout(w.type) && GroupKernelFor(kernels, w.type) != nullptr;
}

int64_t GroupedMatrixBytes(const WeightView& w) {
  return ChunkCount(w.n_out) * GroupBytes(w.type, w.n_in);
}

namespace {

WeightView GroupedView(const WeightView& w, const void* packed) {
  WeightView view = w;
  view.data = packed;
  view.grouped = true;
  return view;
}

}  // namespace

WeightView PackMatrix(const WeightView& w, void* dst, ThreadPool& pool) {
  GROVE_CHECK(!w.grouped && HasGroupLayout(w.type), "matmul: cannot pack ", GgmlTypeName(w.type),
              w.grouped ? " (already grouped)" : "");
  GROVE_CHECK(GroupBytes(w.type, w.n_in) == kGroupRows * w.row_bytes,
              "matmul: packed rows must be dense");
  const auto* src = static_cast<const uint8_t*>(w.data);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t group_bytes = GroupBytes(w.type, w.n_in);
  pool.ParallelFor(ChunkCount(w.n_out), [&](int64_t g_begin, int64_t g_end) {
    for (int64_t g = g_begin; g < g_end; ++g) {
      const int n = static_cast<int>(std::min<int64_t>(kGroupRows, w.n_out - g * kGroupRows));
      PackRowGroup(w.type, src + g * kGroupRows * w.row_bytes, w.row_bytes, n, w.n_in,
                   out + g * group_bytes);
    }
  });
  return GroupedView(w, dst);
}

std::optional<WeightView> PackedMatrixOf(const WeightView& w, const void* packed) {
  GROVE_CHECK(!w.grouped && HasGroupLayout(w.type), "matmul: cannot pack ", GgmlTypeName(w.type),
              w.grouped ? " (already grouped)" : "");
  const auto* src = static_cast<const uint8_t*>(w.data);
  const auto* kept = static_cast<const uint8_t*>(packed);
  const int64_t group_bytes = GroupBytes(w.type, w.n_in);
  std::vector<uint8_t> fresh(static_cast<std::size_t>(group_bytes));
  for (const int64_t g : {int64_t{0}, ChunkCount(w.n_out) - 1}) {
    const int n = static_cast<int>(std::min<int64_t>(kGroupRows, w.n_out - g * kGroupRows));
    PackRowGroup(w.type, src + g * kGroupRows * w.row_bytes, w.row_bytes, n, w.n_in, fresh.data());
    if (std::memcmp(fresh.data(), kept + g * group_bytes, fresh.size()) != 0) return std::nullopt;
  }
  return GroupedView(w, packed);
}

bool CanFuseMatMuls(std::span<const MatMulOutput> outs) {
  for (const MatMulOutput& out : outs) {
    if (out.w.n_in != outs[0].w.n_in || ActFormatOf(out.w) != ActFormatOf(outs[0].w)) {
      return false;
    }
  }
  return true;
}

void MatMulFused(std::span<const MatMulOutput> outs, const float* x, int n_rows,
                 MatMulScratch& scratch, ThreadPool& pool) {
  const KernelSet& kernels = ActiveKernels();
  GROVE_CHECK(!outs.empty() && CanFuseMatMuls(outs),
              "matmul: fused matrices differ in input width or activation format");
  int64_t n_total = 0;
  for (const MatMulOutput& out : outs) {
    CheckWeights(kernels, out.w, n_rows, scratch);
    n_total += out.w.n_out;
  }
  if (n_rows == 0 || n_total == 0) return;
  const Activations act =
      PrepareActivations(kernels, ActFormatOf(outs[0].w), outs[0].w.n_in, x, n_rows, scratch, pool);
  // Threads split the concatenated output chunks of all matrices; a thread's range may span
  // several matrices. Every row costs the same (same n_in), so the split stays balanced.
  int64_t n_chunks = 0;
  for (const MatMulOutput& out : outs) n_chunks += ChunkCount(out.w.n_out);
  ParallelForWork(pool, n_chunks, n_rows * outs[0].w.n_in * n_total,
                  [&](int64_t begin, int64_t end) {
                    int64_t base = 0;
                    for (const MatMulOutput& out : outs) {
                      const int64_t c_begin = std::max<int64_t>(begin - base, 0);
                      const int64_t c_end = std::min<int64_t>(end - base, ChunkCount(out.w.n_out));
                      if (c_begin < c_end)
                        ComputeChunks(kernels, out.w, act, n_rows, c_begin, c_end, out.y);
                      base += ChunkCount(out.w.n_out);
                    }
                  });
}

void MatMulColumns(std::span<const MatMulOutput> outs, const float* x, int n_rows,
                   FunctionRef<void(int64_t, int64_t)> epilogue, MatMulScratch& scratch,
                   ThreadPool& pool) {
  const KernelSet& kernels = ActiveKernels();
  GROVE_CHECK(!outs.empty() && CanFuseMatMuls(outs),
              "matmul: fused matrices differ in input width or activation format");
  for (const MatMulOutput& out : outs) {
    CheckWeights(kernels, out.w, n_rows, scratch);
    GROVE_CHECK(out.w.n_out == outs[0].w.n_out, "matmul: column-fused matrices differ in n_out");
  }
  const int64_t n_out = outs[0].w.n_out;
  if (n_rows == 0 || n_out == 0) return;
  const Activations act =
      PrepareActivations(kernels, ActFormatOf(outs[0].w), outs[0].w.n_in, x, n_rows, scratch, pool);
  // Ranges start at multiples of kOutChunk so that each matrix's chunks stay whole cache lines.
  const int64_t macs = n_rows * outs[0].w.n_in * n_out * static_cast<int64_t>(outs.size());
  ParallelForWork(pool, ChunkCount(n_out), macs, [&](int64_t c_begin, int64_t c_end) {
    for (const MatMulOutput& out : outs) {
      ComputeChunks(kernels, out.w, act, n_rows, c_begin, c_end, out.y);
    }
    epilogue(c_begin * kOutChunk, std::min(n_out, c_end * kOutChunk));
  });
}

void AddBiasRows(std::span<const float> bias, float* y, int64_t n_rows) {
  const auto width = static_cast<int64_t>(bias.size());
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = y + r * width;
    for (int64_t j = 0; j < width; ++j) row[j] += bias[static_cast<std::size_t>(j)];
  }
}

}  // namespace grove
