// grove quantize IN OUT TYPE: rewrite a GGUF model with its weight matrices in another type.
//
// Metadata is copied unchanged except general.file_type (and general.quantization_version, which
// the GGUF spec requires once any tensor is quantized). Matrices are converted row by row,
// dequantize then quantize, while the output is written, so memory holds one tensor's worth of rows
// at most beside the mapped input. 1-D tensors (norms) are stored as f32: they are tiny and every
// engine reads them so.
//
// Rows whose length is not a multiple of the target's block size cannot be stored in it; like
// llama-quantize, such a tensor falls back (with a warning naming it) to the first of q8_0, f16,
// f32 whose block fits (quant/quant_mix.h). TYPEs "q2_k", "q3_k_s/m/l", "q4_k_s/m", "q5_k_s/m",
// "iq4_nl" and "iq4_xs" are llama.cpp's presets (mixes): the base type with more bits for the
// output matrix and for attn_v, ffn_down and attn_output where llama.cpp gives them more, chosen
// as llama-quantize does without an importance matrix. The other TYPEs store every matrix in one
// type (llama-quantize --pure).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "commands.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "option_checks.h"
#include "output_path.h"
#include "quant/quant.h"
#include "quant/quant_mix.h"

namespace grove::cli {
namespace {

struct QuantizeOptions {
  std::string in;
  std::string out;
  std::string type;
  int threads = 0;
  bool verbose = false;
  bool force = false;
};

// A TYPE argument: one type for every matrix, or a mix rule on top of a base type.
struct QuantTarget {
  std::string name;    // as the user may write it, lower case
  GgmlType base;       // type of most matrices
  uint32_t file_type;  // llama.cpp's LLAMA_FTYPE_* for general.file_type
  QuantMix mix = QuantMix::kNone;
};

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

const QuantTarget& ParseTarget(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (const QuantTarget& t : KnownTargets()) {
    if (t.name != name) continue;
    if (!TargetSupported(t))
      Fail("type '", name, "' is not supported yet (supported: ", SupportedTargetNames(), ")");
    return t;
  }
  // A type the GGUF format knows but grove does not write gets a more precise message.
  for (uint32_t id = 0; id < 64; ++id) {
    auto traits = GetGgmlTypeTraits(id);
    if (!traits) continue;
    std::string known(traits->name);
    std::transform(known.begin(), known.end(), known.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (known == name)
      Fail("type '", name,
           "' is a GGUF type grove does not write (it writes: ", SupportedTargetNames(), ")");
  }
  Fail("unknown type '", name, "' (supported: ", SupportedTargetNames(), ")");
}

bool IsQuantized(GgmlType t) {
  return t != GgmlType::kF32 && t != GgmlType::kF16 && t != GgmlType::kBF16;
}

struct TensorPlan {
  const GgufTensor* src;
  GgmlType type;  // of the output
  bool copy;      // same type: bytes copied as they are
};

// Decides every tensor's output type before anything is written, so every problem is reported up
// front and the lazy fillers cannot fail half-way through the output.
std::vector<TensorPlan> PlanTensors(const GgufFile& in, const QuantTarget& target) {
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
  std::vector<TensorPlan> plans;
  bool warned_requantize = false;
  for (const GgufTensor& t : in.tensors()) {
    const int64_t row = t.shape[0];
    GgmlType type = GgmlType::kF32;  // 1-D: norms and biases stay f32
    if (t.shape.size() >= 2) {
      const GgmlType wanted = MixTensorType(target.mix, target.base, t.name, model);
      type = FallbackType(wanted, row);
      if (type != wanted) {
        Log(LogLevel::kWarn,
            StrCat("tensor '", t.name, "': rows of ", row, " are not a multiple of the ",
                   GgmlTypeName(wanted), " block size ", GgmlTraits(wanted).block_size,
                   "; stored as ", GgmlTypeName(type)));
      }
    }
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

void RunQuantize(const QuantizeOptions& o) {
  InstallStderrLog(o.verbose);
  const QuantTarget& target = ParseTarget(o.type);
  if (o.threads < 0) Fail("-t ", o.threads, " must be >= 0 (0: all hardware threads)");
  auto in = GgufFile::Open(o.in);
  CheckOutputFile(o.out, "output", {.inputs = {o.in}, .force = &o.force});
  const std::vector<TensorPlan> plans = PlanTensors(*in, target);

  GgufWriter writer(in->alignment());
  bool wrote_file_type = false;
  for (const auto& [key, value] : in->metadata()) {
    if (key == "general.file_type") {
      writer.SetUint32(key, target.file_type);
      wrote_file_type = true;
    } else {
      writer.SetValue(key, value);
    }
  }
  // llama-quantize always records the file type; the GGUF spec requires the quantization version
  // (2, ggml's GGML_QNT_VERSION) whenever a tensor is quantized.
  if (!wrote_file_type) writer.SetUint32("general.file_type", target.file_type);
  const bool any_quantized = std::any_of(plans.begin(), plans.end(),
                                         [](const TensorPlan& p) { return IsQuantized(p.type); });
  if (any_quantized && !in->Has("general.quantization_version"))
    writer.SetUint32("general.quantization_version", 2);

  ThreadPool pool(o.threads);
  uint64_t in_bytes = 0;
  for (const TensorPlan& plan : plans) {
    in_bytes += plan.src->n_bytes;
    writer.AddTensor(plan.src->name, plan.src->shape, plan.type,
                     [&pool, &plan, verbose = o.verbose](std::span<uint8_t> dst) {
                       ConvertTensor(pool, plan, dst);
                       if (verbose) {
                         std::fprintf(stderr, "%-32s %-10s %6s -> %s\n", plan.src->name.c_str(),
                                      plan.src->shape_string().c_str(),
                                      std::string(GgmlTypeName(plan.src->type)).c_str(),
                                      std::string(GgmlTypeName(plan.type)).c_str());
                       }
                     });
  }

  Timer timer;
  const bool tty = ::isatty(STDERR_FILENO);
  // The writer removes its temporary file when a write or a filler fails.
  writer.WriteFile(o.out, [tty, verbose = o.verbose](std::size_t done, std::size_t total) {
    if (verbose) return;  // each tensor has its own line already
    // A line that rewrites itself on a terminal; one line per tenth in a log.
    if (tty) {
      std::fprintf(stderr, "\rquantizing tensors: %zu/%zu", done, total);
      if (done == total) std::fprintf(stderr, "\n");
    } else if (done * 10 / total != (done - 1) * 10 / total) {
      std::fprintf(stderr, "quantizing tensors: %zu/%zu\n", done, total);
    }
  });
  const uint64_t out_bytes = std::filesystem::file_size(o.out);
  std::fprintf(
      stderr,
      "wrote %s: %s, %.1f MiB of tensors -> %.1f MiB file, %zu tensors, %.1f s, %d threads\n",
      o.out.c_str(), target.name.c_str(), in_bytes / 1048576.0, out_bytes / 1048576.0, plans.size(),
      timer.Seconds(), pool.size());
}

}  // namespace

void AddQuantizeCommand(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("quantize", "Convert a GGUF model's weight matrices to another type");
  auto o = std::make_shared<QuantizeOptions>();
  cmd->add_option("IN", o->in, "Input GGUF model")->required();
  cmd->add_option("OUT", o->out,
                  "Output GGUF path (written to a new temporary file beside it, then renamed)")
      ->required();
  cmd->add_option(
         "TYPE", o->type,
         "Target type, every matrix in it: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q3_k, "
         "q4_k, q5_k, q6_k; or one of llama.cpp's presets (more bits for the output, attn_v and "
         "ffn_down matrices, as llama-quantize chooses them): q2_k, q3_k_s, q3_k_m, q3_k_l, "
         "q4_k_s, q4_k_m, q5_k_s, q5_k_m, iq4_nl, iq4_xs")
      ->required();
  cmd->add_option("-t,--threads", o->threads, "Threads (0: all hardware threads)")
      ->capture_default_str()
      ->check(ThreadCount());
  cmd->add_flag("--force", o->force, "Replace OUT even if it is a read-only file");
  cmd->add_flag("-v,--verbose", o->verbose, "Print each tensor's conversion");
  cmd->footer(
      "Matrices take TYPE; 1-D tensors (norms) are stored as f32. A matrix whose rows do not "
      "divide into "
      "TYPE's blocks falls back, with a warning, to q8_0, f16 or f32 (the first that fits).");
  cmd->callback([o] { RunQuantize(*o); });
}

}  // namespace grove::cli
