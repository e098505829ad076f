#include "quant/quantize_file.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "io/gguf_writer.h"
#include "quant/quant.h"

namespace grove {
namespace {

// llama.cpp's llama_ftype numbering (llama.h). A pure q4_K file has no number of its own; it is
// labelled MOSTLY_Q4_K_S (14), the closest llama.cpp file type; likewise pure q3_K and q5_K.
const std::vector<QuantTarget>& KnownTargets() {
  static const std::vector<QuantTarget> targets = {
      {"f32", GgmlType::kF32, 0},
      {"f16", GgmlType::kF16, 1},
      {"bf16", GgmlType::kBF16, 32},
      {"q8_0", GgmlType::kQ8_0, 7},
      {"q4_0", GgmlType::kQ4_0, 2},
      {"q4_1", GgmlType::kQ4_1, 3},
      {"q5_0", GgmlType::kQ5_0, 8},
      {"q5_1", GgmlType::kQ5_1, 9},
      {"q3_k", GgmlType::kQ3_K, 11},
      {"q4_k", GgmlType::kQ4_K, 14},
      {"q5_k", GgmlType::kQ5_K, 16},
      {"q6_k", GgmlType::kQ6_K, 18},
      {"q2_k", GgmlType::kQ2_K, 10, QuantMix::kQ2_K},
      {"q3_k_m", GgmlType::kQ3_K, 12, QuantMix::kQ3_K_M},
      {"q4_k_m", GgmlType::kQ4_K, 15, QuantMix::kQ4_K_M},
      {"q5_k_m", GgmlType::kQ5_K, 17, QuantMix::kQ5_K_M},
      {"q3_k_s", GgmlType::kQ3_K, 11, QuantMix::kQ3_K_S},
      {"q3_k_l", GgmlType::kQ3_K, 13, QuantMix::kQ3_K_L},
      {"q4_k_s", GgmlType::kQ4_K, 14, QuantMix::kQ4_K_S},
      {"q5_k_s", GgmlType::kQ5_K, 16, QuantMix::kQ5_K_S},
      {"iq4_nl", GgmlType::kIQ4_NL, 25, QuantMix::kIQ4},
      {"iq4_xs", GgmlType::kIQ4_XS, 30, QuantMix::kIQ4},
      {"mxfp4_moe", GgmlType::kMXFP4, 38, QuantMix::kMXFP4_MoE},
  };
  return targets;
}

// The mixes add Q3_K..Q6_K matrices and fall back to Q4_0..Q8_0 and F16, all of which grove writes.
bool TargetSupported(const QuantTarget& t) { return CanQuantize(t.base); }

std::string SupportedTargetNames() {
  std::string names;
  for (const QuantTarget& t : KnownTargets()) {
    if (TargetSupported(t)) names += (names.empty() ? "" : ", ") + t.name;
  }
  return names;
}

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return text;
}

bool IsQuantized(GgmlType t) {
  return t != GgmlType::kF32 && t != GgmlType::kF16 && t != GgmlType::kBF16;
}

struct TensorPlan {
  const GgufTensor* src;
  GgmlType type;  // of the output
  bool copy;      // same type: bytes copied as they are
};

// What the mix rules read of the model: its layers, whether it has an output matrix, its GQA.
MixModel MixModelOf(const GgufFile& in) {
  MixModel model;
  model.has_output = false;
  for (const GgufTensor& t : in.tensors()) {
    int layer = -1;
    if (std::sscanf(t.name.c_str(), "blk.%d.", &layer) == 1)
      model.n_layer = std::max(model.n_layer, layer + 1);
    model.has_output |= t.name == "output.weight";
  }
  const std::string arch = in.GetString("general.architecture", "");
  const uint64_t heads = in.GetUint(arch + ".attention.head_count", 1);
  const uint64_t kv_heads = in.GetUint(arch + ".attention.head_count_kv", heads);
  model.n_gqa = kv_heads > 0 ? static_cast<int>(heads / kv_heads) : 1;
  return model;
}

// The type a tensor is stored in: 1-D ones (norms, biases) stay f32, and so does a Gated
// DeltaNet's conv1d (rows of a few taps, which llama.cpp never quantizes); so do the 2-D biases of
// gpt-oss's experts (llama-quantize quantizes only names that end in "weight"); matrices take the
// mix's type or the fallback their rows fit.
GgmlType OutputType(const GgufTensor& t, const QuantTarget& target, const MixModel& model) {
  if (t.shape.size() < 2) return GgmlType::kF32;
  const std::string_view weight = "weight";
  if (t.name.size() < weight.size() ||
      t.name.compare(t.name.size() - weight.size(), weight.size(), weight) != 0) {
    return GgmlType::kF32;
  }
  if (t.name.find("ssm_conv1d") != std::string::npos) return GgmlType::kF32;
  // A mixture's router keeps its type, as llama-quantize keeps it (f32 in converted files): it is
  // n_expert rows, a small part of a layer, and a rounding in its logits changes which experts a
  // token runs through, not only by how much.
  const std::string_view router = ".ffn_gate_inp.weight";
  if (t.name.size() > router.size() &&
      t.name.compare(t.name.size() - router.size(), router.size(), router) == 0) {
    return t.type;
  }
  const int64_t row = t.shape[0];
  const int64_t n_matrices = t.shape.size() > 2 ? t.shape[2] : 1;
  const GgmlType wanted = MixTensorType(target.mix, target.base, t.name, n_matrices, model);
  const GgmlType type = FallbackType(wanted, row);
  if (type != wanted) {
    Log(LogLevel::kWarn, StrCat("tensor '", t.name, "': rows of ", row,
                                " are not a multiple of the ", GgmlTypeName(wanted), " block size ",
                                GgmlTraits(wanted).block_size, "; stored as ", GgmlTypeName(type)));
  }
  return type;
}

// Decides every tensor's output type before anything is written, so every problem is reported up
// front and the lazy fillers cannot fail half-way through the output.
std::vector<TensorPlan> PlanTensors(const GgufFile& in, const QuantTarget& target) {
  const MixModel model = MixModelOf(in);
  std::vector<TensorPlan> plans;
  bool warned_requantize = false;
  for (const GgufTensor& t : in.tensors()) {
    const GgmlType type = OutputType(t, target, model);
    const bool copy = t.type == type;
    if (!copy && !CanDequantize(t.type)) {
      Fail("tensor '", t.name, "' is ", GgmlTypeName(t.type),
           ", which grove cannot decode to convert it to ", GgmlTypeName(type));
    }
    if (!copy && IsQuantized(t.type) && !warned_requantize) {
      Log(LogLevel::kWarn, StrCat("'", in.name(), "' is already quantized (tensor '", t.name,
                                  "' is ", GgmlTypeName(t.type),
                                  "); requantizing compounds the rounding error. "
                                  "Quantize from f32/f16/bf16 when you can"));
      warned_requantize = true;
    }
    plans.push_back({&t, type, copy});
  }
  return plans;
}

// Converts one tensor into dst, rows split across the pool's threads (rows are independent).
void ConvertTensor(ThreadPool& pool, const TensorPlan& plan, std::span<uint8_t> dst) {
  const GgufTensor& t = *plan.src;
  if (plan.copy) {
    std::memcpy(dst.data(), t.data, dst.size());
    return;
  }
  const int64_t row = t.shape[0];
  const int64_t n_rows = t.n_elements() / row;
  const int64_t src_row_bytes = GgmlRowBytes(t.type, row);
  const int64_t dst_row_bytes = GgmlRowBytes(plan.type, row);
  pool.Run([&](int thread, int n_threads) {
    std::vector<float> floats(static_cast<std::size_t>(row));  // once per tensor and thread
    for (int64_t r = n_rows * thread / n_threads; r < n_rows * (thread + 1) / n_threads; ++r) {
      DequantizeRow(t.type, t.data + r * src_row_bytes, floats.data(), row);
      QuantizeRow(plan.type, floats.data(), dst.data() + r * dst_row_bytes, row);
    }
  });
}

// The input's metadata with the target's file type, and the quantization version the GGUF spec
// requires (2, ggml's GGML_QNT_VERSION) whenever a tensor is quantized; llama-quantize always
// records the file type.
void CopyMetadata(const GgufFile& in, const QuantTarget& target, bool any_quantized,
                  GgufWriter& writer) {
  bool wrote_file_type = false;
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.file_type") {
      writer.SetUint32(key, target.file_type);
      wrote_file_type = true;
    } else {
      writer.SetValue(key, value);
    }
  }
  if (!wrote_file_type) writer.SetUint32("general.file_type", target.file_type);
  if (any_quantized && !in.Has("general.quantization_version"))
    writer.SetUint32("general.quantization_version", 2);
}

}  // namespace

const QuantTarget& ParseQuantTarget(std::string name) {
  name = Lower(std::move(name));
  for (const QuantTarget& t : KnownTargets()) {
    if (t.name != name) continue;
    if (!TargetSupported(t))
      Fail("type '", name, "' is not supported yet (supported: ", SupportedTargetNames(), ")");
    return t;
  }
  // A type the GGUF format knows but grove does not write gets a more precise message.
  for (uint32_t id = 0; id < 64; ++id) {
    auto traits = GetGgmlTypeTraits(id);
    if (traits && Lower(std::string(traits->name)) == name)
      Fail("type '", name,
           "' is a GGUF type grove does not write (it writes: ", SupportedTargetNames(), ")");
  }
  Fail("unknown type '", name, "' (supported: ", SupportedTargetNames(), ")");
}

QuantizeFileReport QuantizeFile(
    const GgufFile& in, const std::string& out, const QuantTarget& target, ThreadPool& pool,
    const std::function<void(const GgufTensor& src, GgmlType type)>& on_tensor,
    const std::function<void(std::size_t done, std::size_t total)>& progress) {
  const std::vector<TensorPlan> plans = PlanTensors(in, target);
  GgufWriter writer(in.alignment());
  CopyMetadata(in, target,
               std::any_of(plans.begin(), plans.end(),
                           [](const TensorPlan& p) { return IsQuantized(p.type); }),
               writer);
  QuantizeFileReport report{.tensors = plans.size()};
  for (const TensorPlan& plan : plans) {
    report.in_bytes += plan.src->n_bytes;
    writer.AddTensor(plan.src->name, plan.src->shape, plan.type,
                     [&pool, &plan, &on_tensor](std::span<uint8_t> dst) {
                       ConvertTensor(pool, plan, dst);
                       if (on_tensor) on_tensor(*plan.src, plan.type);
                     });
  }
  // The writer removes its temporary file when a write or a filler fails.
  writer.WriteFile(out, progress);
  return report;
}

}  // namespace grove
