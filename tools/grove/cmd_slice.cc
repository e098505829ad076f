// grove slice -m MODEL --layers N -o OUT: a draft model made of a target's first N blocks.
#include <cstdio>
#include <string>

#include "base/error.h"
#include "commands.h"
#include "engine_options.h"
#include "io/gguf.h"
#include "model/layer_slice.h"
#include "output_path.h"

namespace grove::cli {

void AddSliceCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("slice", "Write a draft model made of a model's first N layers");
  struct Options {
    std::string model, out;
    int32_t layers = 1;
    bool force = false;
  };
  auto o = std::make_shared<Options>();
  AddModelOption(*cmd, o->model, ModelRole::kModel);
  cmd->add_option("--layers", o->layers, "Blocks to keep")->required();
  cmd->add_option("-o,--out", o->out, "Output GGUF path")->required();
  cmd->add_flag("--force", o->force, "Replace OUT even if it is a read-only file");
  cmd->callback([o] {
    auto source = GgufFile::Open(o->model);
    CheckOutputFile(o->out, "-o", {.inputs = {o->model}, .force = &o->force});
    LayerSliceWriter(*source, o->layers).WriteFile(o->out);
    std::fprintf(stderr, "wrote %s (first %d layers of %s)\n", o->out.c_str(), o->layers,
                 o->model.c_str());
  });
}

}  // namespace grove::cli
