// grove quantize IN OUT TYPE: rewrite a GGUF model with its weight matrices in another type
// (quant/quantize_file.h says how), printing each tensor's conversion or the progress, and what
// was written.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "commands.h"
#include "engine_options.h"
#include "io/gguf.h"
#include "option_checks.h"
#include "output_path.h"
#include "quant/quantize_file.h"

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

void PrintTensor(const GgufTensor& src, GgmlType type) {
  std::fprintf(stderr, "%-32s %-10s %6s -> %s\n", src.name.c_str(), src.shape_string().c_str(),
               std::string(GgmlTypeName(src.type)).c_str(),
               std::string(GgmlTypeName(type)).c_str());
}

// A line that rewrites itself on a terminal; one line per tenth in a log.
void PrintProgress(bool tty, std::size_t done, std::size_t total) {
  if (tty) {
    std::fprintf(stderr, "\rquantizing tensors: %zu/%zu", done, total);
    if (done == total) std::fprintf(stderr, "\n");
  } else if (done * 10 / total != (done - 1) * 10 / total) {
    std::fprintf(stderr, "quantizing tensors: %zu/%zu\n", done, total);
  }
}

void RunQuantize(const QuantizeOptions& o) {
  InstallStderrLog(o.verbose);
  const QuantTarget& target = ParseQuantTarget(o.type);
  if (o.threads < 0) Fail("-t ", o.threads, " must be >= 0 (0: all hardware threads)");
  auto in = GgufFile::Open(o.in);
  CheckOutputFile(o.out, "output", {.inputs = {o.in}, .force = &o.force});
  ThreadPool pool(o.threads);
  const bool tty = ::isatty(STDERR_FILENO);
  Timer timer;
  // Verbose: each tensor has its own line, and no progress line.
  const QuantizeFileReport report =
      o.verbose
          ? QuantizeFile(*in, o.out, target, pool, PrintTensor)
          : QuantizeFile(*in, o.out, target, pool, {}, [tty](std::size_t done, std::size_t total) {
              PrintProgress(tty, done, total);
            });
  const uint64_t out_bytes = std::filesystem::file_size(o.out);
  std::fprintf(
      stderr,
      "wrote %s: %s, %.1f MiB of tensors -> %.1f MiB file, %zu tensors, %.1f s, %d threads\n",
      o.out.c_str(), target.name.c_str(), report.in_bytes / 1048576.0, out_bytes / 1048576.0,
      report.tensors, timer.Seconds(), pool.size());
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
         "q4_k_s, q4_k_m, q5_k_s, q5_k_m, iq4_nl, iq4_xs; mxfp4_moe (a mixture's experts in "
         "MXFP4, every other matrix q8_0, as llama-quantize's MXFP4_MOE)")
      ->required();
  AddThreadsOption(*cmd, o->threads);
  cmd->add_flag("--force", o->force, "Replace OUT even if it is a read-only file");
  cmd->add_flag("-v,--verbose", o->verbose, "Print each tensor's conversion");
  cmd->footer(
      "Matrices take TYPE; 1-D tensors (norms) are stored as f32. A matrix whose rows do not "
      "divide into "
      "TYPE's blocks falls back, with a warning, to q8_0, f16 or f32 (the first that fits).");
  cmd->callback([o] { RunQuantize(*o); });
}

}  // namespace grove::cli
