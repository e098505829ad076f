#include "model/cuda_weights.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "base/error.h"
#include "base/log.h"
#include "io/ggml_type.h"
#include "model/model_parameters.h"
#include "quant/half.h"
#include "quant/packed.h"
#include "quant/quant.h"

namespace grove {
namespace {

constexpr std::size_t kStagingBytes = std::size_t{64} << 20;
constexpr int kQ8Block = 32;
constexpr int kQ8BlockBytes = 34;  // fp16 scale, 32 quants

int64_t RoundUp(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

// The types whose bytes the GPU multiplies with as they are; every other is expanded to F16.
bool KeptAsIs(GgmlType type) {
  return type == GgmlType::kBF16 || type == GgmlType::kF16 || type == GgmlType::kQ8_0;
}

cuda::MatrixFormat FormatOf(GgmlType type) {
  switch (type) {
    case GgmlType::kBF16:
      return cuda::MatrixFormat::kBf16;
    case GgmlType::kQ8_0:
      return cuda::MatrixFormat::kQ8;
    default:
      return cuda::MatrixFormat::kF16;  // F16 itself, or expanded
  }
}

// Row r of a matrix in GGUF layout (a regrouped matrix is unpacked, quant/packed.h).
class RowReader {
 public:
  explicit RowReader(const WeightView& w) : w_(w) {
    if (w.grouped) group_rows_.resize(static_cast<std::size_t>(kGroupRows * w.row_bytes));
  }
  const uint8_t* Row(int64_t r) {
    const auto* data = static_cast<const uint8_t*>(w_.data);
    if (!w_.grouped) return data + r * w_.row_bytes;
    const int64_t group = r / kGroupRows;
    if (group != group_) {
      const int rows =
          static_cast<int>(std::min<int64_t>(kGroupRows, w_.n_out - group * kGroupRows));
      UnpackRowGroup(w_.type, data + group * GroupBytes(w_.type, w_.n_in), rows, w_.n_in,
                     group_rows_.data(), w_.row_bytes);
      group_ = group;
    }
    return group_rows_.data() + (r % kGroupRows) * w_.row_bytes;
  }

 private:
  const WeightView& w_;
  std::vector<uint8_t> group_rows_;
  int64_t group_ = -1;
};

class Uploader {
 public:
  explicit Uploader(CudaWeights& out) : out_(out), staging_(kStagingBytes) {}

  const float* Vector(const std::vector<float>& v) {
    if (v.empty()) return nullptr;
    const std::size_t bytes = v.size() * sizeof(float);
    auto* device = static_cast<float*>(Add(bytes));
    cuda::CopyToDevice(device, v.data(), bytes);
    cuda::Sync();
    return device;
  }

  cuda::DeviceMatrix Matrix(const WeightView& w) {
    if (w.n_in % 4 != 0) Fail("cuda: a matrix of rows of ", w.n_in, " (a multiple of 4 runs)");
    cuda::DeviceMatrix m{
        .format = FormatOf(w.type),
        .n_out = static_cast<int32_t>(w.n_out),
        .n_in = static_cast<int32_t>(w.n_in),
        .n_in_padded = static_cast<int32_t>(RoundUp(w.n_in, cuda::kMatMulRowAlign))};
    if (!KeptAsIs(w.type)) ++expanded_[std::string(GgmlTypeName(w.type))];
    const int64_t out_padded = RoundUp(w.n_out, cuda::kMatMulOutAlign);
    const bool q8 = m.format == cuda::MatrixFormat::kQ8;
    const int64_t row_bytes = q8 ? m.n_in_padded : 2 * int64_t{m.n_in_padded};
    const int64_t scale_bytes = q8 ? m.n_in_padded / kQ8Block * 2 : 0;
    auto* data_dev = static_cast<uint8_t*>(Add(static_cast<std::size_t>(out_padded * row_bytes)));
    m.data = data_dev;
    uint8_t* scales_dev = nullptr;
    if (q8) {
      scales_dev = static_cast<uint8_t*>(Add(static_cast<std::size_t>(out_padded * scale_bytes)));
      m.scales = scales_dev;
    }
    RowReader reader(w);
    std::vector<float> f32(static_cast<std::size_t>(w.n_in));
    const int64_t rows_per_batch = std::max<int64_t>(
        1, static_cast<int64_t>(kStagingBytes) / std::max<int64_t>(row_bytes, scale_bytes) / 2);
    for (int64_t first = 0; first < w.n_out; first += rows_per_batch) {
      const int64_t count = std::min(rows_per_batch, w.n_out - first);
      uint8_t* rows = staging_.as<uint8_t>();
      uint8_t* scales = rows + count * row_bytes;
      std::memset(rows, 0, static_cast<std::size_t>(count * row_bytes));
      for (int64_t r = 0; r < count; ++r) {
        const uint8_t* src = reader.Row(first + r);
        uint8_t* dst = rows + r * row_bytes;
        if (q8) {
          Q8Row(src, w.n_in, dst, scales + r * scale_bytes, m.n_in_padded);
        } else if (KeptAsIs(w.type)) {
          std::memcpy(dst, src, static_cast<std::size_t>(2 * w.n_in));
        } else {
          DequantizeRow(w.type, src, f32.data(), w.n_in);
          auto* half = reinterpret_cast<uint16_t*>(dst);
          for (int64_t k = 0; k < w.n_in; ++k)
            half[k] = Fp32ToFp16(f32[static_cast<std::size_t>(k)]);
        }
      }
      cuda::CopyToDevice(data_dev + first * row_bytes, rows,
                         static_cast<std::size_t>(count * row_bytes));
      if (q8) {
        cuda::CopyToDevice(scales_dev + first * scale_bytes, scales,
                           static_cast<std::size_t>(count * scale_bytes));
      }
      cuda::Sync();  // the staging buffer is reused
    }
    return m;
  }

  // Says which types were expanded (memory and bandwidth the user should know of).
  void Finish(const std::string& file) const {
    for (const auto& [type, count] : expanded_) {
      Log(LogLevel::kWarn, file, ": ", count, " ", type,
          " matrices expanded to F16 on the GPU (no kernel of their own for ", type, " yet)");
    }
  }

 private:
  // Zeroed device memory held by the weights; the address stays valid as buffers are added.
  void* Add(std::size_t bytes) {
    out_.buffers.emplace_back(bytes);
    out_.bytes += bytes;
    cuda::Fill(out_.buffers.back().data(), 0, bytes);
    return out_.buffers.back().data();
  }

  // One Q8_0 row: quants permuted within each 64-element chunk (cuda/kernels.h), scales in
  // order; the padding past n_in stays zero.
  static void Q8Row(const uint8_t* src, int64_t n_in, uint8_t* quants, uint8_t* scales,
                    int32_t n_in_padded) {
    const int64_t n_blocks = n_in / kQ8Block;
    for (int64_t b = 0; b < n_blocks; ++b) std::memcpy(scales + 2 * b, src + b * kQ8BlockBytes, 2);
    // Runs of 4 bytes stay together (PermutedQ8Index(p) .. + 3 for p a multiple of 4).
    for (int32_t p = 0; p < n_in_padded; p += 4) {
      const int64_t element = p / 64 * 64 + cuda::PermutedQ8Index(p % 64);
      if (element >= n_in) continue;  // padding: left zero
      const uint8_t* block = src + element / kQ8Block * kQ8BlockBytes + 2;
      std::memcpy(quants + p, block + element % kQ8Block, 4);
    }
  }

  CudaWeights& out_;
  cuda::HostBuffer staging_;
  std::map<std::string, int> expanded_;
};

// Device bytes the matrices will take (checked against the free memory before the upload starts;
// the norms and biases add a few hundred KB).
uint64_t UploadBytes(const ModelWeights& weights) {
  uint64_t bytes = 0;
  auto matrix = [&](const WeightView& w) {
    const int64_t n_in = RoundUp(w.n_in, cuda::kMatMulRowAlign);
    const int64_t rows = RoundUp(w.n_out, cuda::kMatMulOutAlign);
    bytes += static_cast<uint64_t>(rows) * (w.type == GgmlType::kQ8_0
                                                ? static_cast<uint64_t>(n_in + n_in / kQ8Block * 2)
                                                : static_cast<uint64_t>(2 * n_in));
  };
  for (const LayerWeights& l : weights.layers) {
    for (const WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      matrix(*w);
  }
  matrix(weights.output);
  return bytes;
}

std::shared_ptr<const CudaWeights> Upload(const ModelParameters& parameters) {
  const ModelWeights& w = parameters.weights();
  const cuda::DeviceInfo info = cuda::Info();
  const uint64_t need = UploadBytes(w);
  if (need > info.free_bytes) {
    Fail("cuda: the weights of ", parameters.file_name(), " take ",
         static_cast<double>(need) / (1 << 30), " GiB on the GPU; ", info.name, " has ",
         static_cast<double>(info.free_bytes) / (1 << 30), " GiB free");
  }
  auto out = std::make_shared<CudaWeights>();
  Uploader up(*out);
  for (const LayerWeights& l : w.layers) {
    CudaLayerWeights d;
    d.wq = up.Matrix(l.wq);
    d.wk = up.Matrix(l.wk);
    d.wv = up.Matrix(l.wv);
    d.wo = up.Matrix(l.wo);
    d.w_gate = up.Matrix(l.w_gate);
    d.w_up = up.Matrix(l.w_up);
    d.w_down = up.Matrix(l.w_down);
    d.attn_norm = up.Vector(l.attn_norm);
    d.ffn_norm = up.Vector(l.ffn_norm);
    d.bq = up.Vector(l.bq);
    d.bk = up.Vector(l.bk);
    d.bv = up.Vector(l.bv);
    d.q_norm = up.Vector(l.q_norm);
    d.k_norm = up.Vector(l.k_norm);
    d.attn_post_norm = up.Vector(l.attn_post_norm);
    d.ffn_post_norm = up.Vector(l.ffn_post_norm);
    out->layers.push_back(d);
  }
  out->output = up.Matrix(w.output);
  out->output_norm = up.Vector(w.output_norm);
  up.Finish(parameters.file_name());
  return out;
}

}  // namespace

std::shared_ptr<const CudaWeights> UploadWeights(const ModelParameters& parameters) {
  // One upload per parameters while anyone holds it (weak: the last context gone frees the GPU's
  // copy). Keyed by address; an expired entry at a reused address is uploaded again.
  static std::mutex mutex;
  static std::map<const ModelParameters*, std::weak_ptr<const CudaWeights>> uploaded;
  std::lock_guard lock(mutex);
  if (auto held = uploaded[&parameters].lock()) return held;
  auto weights = Upload(parameters);
  uploaded[&parameters] = weights;
  return weights;
}

}  // namespace grove
