// grove tokenize -m MODEL -p TEXT: how the model's tokenizer splits text.
#include <cstdio>
#include <string>

#include "base/error.h"
#include "commands.h"
#include "engine_options.h"
#include "io/gguf.h"
#include "tokenize/tokenizer.h"

namespace grove::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string prompt;
  bool ids_only = false;
  bool no_bos = false;
  bool parse_special = false;
};

void RunTokenize(const TokenizeOptions& o) {
  auto gguf = GgufFile::Open(o.model);
  if (!gguf->Has("tokenizer.ggml.model"))
    Fail("'", o.model, "' has no tokenizer (no 'tokenizer.ggml.model')");
  auto tok = Tokenizer::FromGguf(*gguf);
  std::vector<int32_t> ids =
      tok->Encode(o.prompt, !o.no_bos && tok->add_bos_by_default(), o.parse_special);
  if (o.ids_only) {
    std::printf("[");
    for (std::size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? ", " : "", ids[i]);
    std::printf("]\n");
    return;
  }
  for (int32_t id : ids) std::printf("%6d -> '%s'\n", id, tok->TokenText(id).c_str());
  std::printf("%zu tokens\n", ids.size());
}

}  // namespace

void AddTokenizeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Split text into the model's tokens");
  auto o = std::make_shared<TokenizeOptions>();
  AddModelOption(*cmd, o->model, ModelRole::kVocabulary);
  cmd->add_option("-p,--prompt", o->prompt, "Text to tokenize")->required();
  cmd->add_flag("--ids", o->ids_only, "Print only the list of token ids");
  cmd->add_flag("--no-bos", o->no_bos, "Do not prepend the BOS token");
  cmd->add_flag("--parse-special", o->parse_special,
                "Turn special-token text (e.g. <s>) into its token");
  cmd->callback([o] { RunTokenize(*o); });
}

}  // namespace grove::cli
