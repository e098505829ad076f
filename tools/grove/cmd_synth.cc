// grove synth: write a random-weight model of a named shape, so that every benchmark figure can be
// reproduced without downloading a model.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "base/error.h"
#include "base/timer.h"
#include "commands.h"
#include "model/random_model.h"
#include "output_path.h"
#include "quant/quant.h"

namespace grove::cli {
namespace {

struct SynthOptions {
  std::string shape = "tinyllama-1.1b";
  std::string type = "q8_0";
  std::string out;
  uint64_t seed = 1;
  int32_t layers = 0;  // 0: the shape's
  bool force = false;
};

void RunSynth(const SynthOptions& o) {
  auto spec = NamedModelShape(o.shape);
  if (!spec) {
    std::string names;
    for (const auto& n : NamedModelShapes()) names += (names.empty() ? "" : ", ") + n;
    Fail("unknown shape '", o.shape, "' (known: ", names, ")");
  }
  auto type = ParseGgmlType(o.type);
  if (!type) Fail("unknown weight type '", o.type, "'");
  spec->type = *type;
  spec->seed = o.seed;
  if (o.layers < 0) Fail("--layers ", o.layers, " is negative");
  if (o.layers > 0) spec->n_layer = o.layers;
  CheckOutputFile(o.out, "-o", {.force = &o.force});
  Timer timer;
  GgufWriter writer = RandomModelWriter(*spec);
  // A progress line that rewrites itself on a terminal; one line per tenth in a log.
  const bool tty = ::isatty(STDERR_FILENO);
  writer.WriteFile(o.out, [tty](std::size_t done, std::size_t total) {
    if (tty) {
      std::fprintf(stderr, "\rwriting tensors: %zu/%zu", done, total);
      if (done == total) std::fprintf(stderr, "\n");
    } else if (done * 10 / total != (done - 1) * 10 / total) {
      std::fprintf(stderr, "writing tensors: %zu/%zu\n", done, total);
    }
  });
  std::fprintf(stderr, "wrote %s (%s, %s, seed %llu) in %.1f s\n", o.out.c_str(), o.shape.c_str(),
               o.type.c_str(), static_cast<unsigned long long>(o.seed), timer.Seconds());
}

}  // namespace

void AddSynthCommand(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("synth", "Write a random-weight model of a named shape (for benchmarks)");
  auto o = std::make_shared<SynthOptions>();
  std::string shapes;
  for (const auto& n : NamedModelShapes()) shapes += (shapes.empty() ? "" : ", ") + n;
  cmd->add_option("--shape", o->shape, "The model's shape: " + shapes)->capture_default_str();
  cmd->add_option("--type", o->type,
                  "Type of every matrix (norms stay f32): " + SupportedWeightTypeNames())
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the weights")->capture_default_str();
  cmd->add_option("--layers", o->layers,
                  "Layers to write (0: the shape's): a real layer shape, fewer of them, to fit "
                  "this machine (qwen3-30b-a3b --layers 8)")
      ->capture_default_str();
  cmd->add_option("-o,--out", o->out, "Output GGUF path")->required();
  cmd->add_flag("--force", o->force, "Replace OUT even if it is a read-only file");
  cmd->callback([o] { RunSynth(*o); });
}

}  // namespace grove::cli
