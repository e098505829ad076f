// grove convert-tokenizer DIR: a Hugging Face tokenizer (tokenizer.json, tokenizer_config.json) as
// a GGUF vocabulary, for `grove tokenize`, `grove template` and llama.cpp alike.
#include <cstdio>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "base/text_file.h"
#include "commands.h"
#include "io/gguf_writer.h"
#include "output_path.h"
#include "tokenize/hf_tokenizer.h"

namespace grove::cli {
namespace {

struct ConvertTokenizerOptions {
  std::string input;
  std::string output;
  bool force = false;
  HfTokenizerOptions convert;
};

void RunConvertTokenizer(const ConvertTokenizerOptions& o) {
  namespace fs = std::filesystem;
  const fs::path input(o.input);
  const fs::path dir = fs::is_directory(input) ? input : input.parent_path();
  const fs::path tokenizer = fs::is_directory(input) ? dir / "tokenizer.json" : input;
  if (!fs::exists(tokenizer)) Fail("convert-tokenizer: '", tokenizer.string(), "' does not exist");
  const fs::path config = dir / "tokenizer_config.json";
  // `-o DIR/tokenizer.json` once replaced its own input and exited 0.
  CheckOutputFile(o.output, "-o",
                  {.inputs = {tokenizer.string(), config.string()}, .force = &o.force});
  const std::string config_text =
      fs::exists(config) ? ReadTextFile(config.string(), "tokenizer_config.json") : std::string();
  if (config_text.empty()) {
    std::fprintf(stderr,
                 "convert-tokenizer: no tokenizer_config.json beside it: no BOS/EOS choice and "
                 "no chat template\n");
  }
  GgufWriter writer;
  const HfTokenizerSummary s = ConvertHfTokenizer(
      ReadTextFile(tokenizer.string(), "tokenizer.json"), config_text, o.convert, &writer);
  writer.WriteFile(o.output);
  std::printf("%s: %d tokens (%d added), %d merges, model '%s'%s%s, %s\n", o.output.c_str(),
              s.n_tokens, s.n_added, s.n_merges, s.model.c_str(),
              s.pre.empty() ? "" : ", pre-tokenizer '", s.pre.empty() ? "" : (s.pre + "'").c_str(),
              s.has_chat_template ? "with its chat template" : "no chat template");
  for (const std::string& note : s.notes)
    std::fprintf(stderr, "convert-tokenizer: note: %s\n", note.c_str());
}

}  // namespace

void AddConvertTokenizerCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "convert-tokenizer",
      "Write a Hugging Face tokenizer (tokenizer.json and tokenizer_config.json) as a GGUF "
      "vocabulary");
  auto o = std::make_shared<ConvertTokenizerOptions>();
  cmd->add_option("input", o->input, "Directory with tokenizer.json, or the tokenizer.json file")
      ->required();
  cmd->add_option("-o,--output", o->output, "GGUF file to write")->required();
  cmd->add_flag("--force", o->force, "Replace a read-only output file");
  cmd->add_option("--pre", o->convert.pre,
                  "llama.cpp pre-tokenizer name for a byte-level vocabulary whose split pattern "
                  "grove does not recognise (e.g. qwen2, llama-bpe)");
  cmd->add_option("--name", o->convert.name, "general.name to write");
  cmd->callback([o] { RunConvertTokenizer(*o); });
}

}  // namespace grove::cli
