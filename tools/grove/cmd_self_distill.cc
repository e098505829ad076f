// grove self-distill: a corpus written by the target itself (ParallelSpec §5.3): the target
// continues the opening of each document of a corpus, and the continuations are the new corpus's
// documents, for `grove train-drafter --corpus`.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/timer.h"
#include "commands.h"
#include "engine_options.h"
#include "model/model.h"
#include "option_checks.h"
#include "output_path.h"
#include "progress_line.h"
#include "sampling_options.h"
#include "tokenize/tokenizer.h"
#include "train/corpus.h"
#include "train/corpus_files.h"
#include "train/self_distill.h"

namespace grove::cli {
namespace {

struct SelfDistillCliOptions {
  std::string target, corpus, out;
  int64_t tokens = 1'000'000;
  int64_t valid_tokens = 0;  // 0: 5% of --tokens
  int32_t prompt_tokens = 12;
  int32_t lanes = 16;
  int32_t threads = 2;
  // Its sampling: --temp (0, greedy, as the paper), the filters and --seed (1).
  SelfDistillOptions distill{.sampling = {.temperature = 0.0f, .seed = 1}};
};

// Continues documents' openings until `budget` tokens are generated; returns the documents' text.
std::string DistillPart(Model& target, const std::vector<std::string_view>& docs, int64_t budget,
                        const SelfDistillCliOptions& o, const char* part) {
  const Tokenizer& tok = *target.tokenizer();
  std::string text;
  int64_t generated = 0;
  std::size_t next = 0;
  ProgressLine progress;
  Timer timer;
  while (generated < budget) {
    // A round of prompts: enough to keep every lane busy for a while.
    std::vector<std::vector<int32_t>> prompts;
    while (prompts.size() < static_cast<std::size_t>(o.lanes) * 4 && next < docs.size()) {
      std::vector<int32_t> ids = tok.Encode(docs[next++], /*add_bos=*/false);
      if (static_cast<int32_t>(ids.size()) <= o.prompt_tokens) continue;
      ids.resize(static_cast<std::size_t>(o.prompt_tokens));
      ids.insert(ids.begin(), tok.eos());  // a document starts after end-of-text, as in training
      prompts.push_back(std::move(ids));
    }
    if (prompts.empty()) {
      Fail("self-distill: the ", part, " part ran out of documents after ", generated,
           " generated tokens (of ", budget, ")");
    }
    const int64_t before = generated;
    SelfDistillOptions round = o.distill;
    round.token_budget = budget - generated;
    const std::vector<std::vector<int32_t>> outs =
        SelfDistill(target, prompts, round, [&](int64_t, int64_t tokens) {
          progress.Update(
              std::min(before + tokens, budget), budget,
              StrCat("self-distill: ", part, " ", before + tokens, "/", budget, " tokens, ",
                     static_cast<int64_t>((before + tokens) / timer.Seconds()), " tokens/s"));
        });
    for (std::size_t i = 0; i < outs.size(); ++i) {
      if (outs[i].empty()) continue;  // not started: the budget was reached
      std::vector<int32_t> doc(prompts[i].begin() + 1, prompts[i].end());
      doc.insert(doc.end(), outs[i].begin(), outs[i].end());
      text += tok.Decode(doc);
      text += "\n\n";
      generated += static_cast<int64_t>(outs[i].size());
    }
  }
  return text;
}

void RunSelfDistill(SelfDistillCliOptions& o) {
  if (o.tokens < 1) Fail("self-distill: --tokens ", o.tokens, " must be >= 1");
  if (o.valid_tokens < 0) Fail("self-distill: --valid-tokens ", o.valid_tokens, " is negative");
  if (o.lanes < 1 || o.lanes > 256) Fail("self-distill: --lanes ", o.lanes, " is not in 1..256");
  if (o.prompt_tokens < 1 || o.prompt_tokens > 256)
    Fail("self-distill: --prompt-tokens ", o.prompt_tokens, " is not in 1..256");
  if (o.distill.max_new_tokens < 1 || o.distill.max_new_tokens > 1'000'000)
    Fail("self-distill: --max-new ", o.distill.max_new_tokens, " is not in 1..1000000");
  o.distill.sampling.Validate();
  CheckOutputDirectory(o.out, "-o", CorpusFiles(),
                       {.inputs = {(std::filesystem::path(o.corpus) / kCorpusTrainFile).string(),
                                   (std::filesystem::path(o.corpus) / kCorpusValidFile).string()}});
  const std::string train_text = ReadCorpusFile(o.corpus, kCorpusTrainFile);
  const std::string valid_text = ReadCorpusFile(o.corpus, kCorpusValidFile);
  const int32_t n_ctx = o.prompt_tokens + 1 + o.distill.max_new_tokens + 1;
  auto target = Model::Load(o.target, {.n_threads = o.threads, .n_ctx = n_ctx, .n_seq = o.lanes});
  if (!target->tokenizer() || target->tokenizer()->eos() < 0)
    Fail("self-distill: '", o.target, "' has no tokenizer with an end-of-text token");
  target->WarmUp();
  Corpus corpus;
  Timer timer;
  corpus.train = DistillPart(*target, SplitDocuments(train_text), o.tokens, o, "train");
  corpus.valid = DistillPart(
      *target, SplitDocuments(valid_text),
      o.valid_tokens > 0 ? o.valid_tokens : std::max<int64_t>(1, o.tokens / 20), o, "valid");
  WriteCorpusFiles(corpus, o.out);
  std::fprintf(stderr, "wrote %s/{train,valid}.txt (%.1f + %.1f MB) in %.0f s\n", o.out.c_str(),
               corpus.train.size() / 1e6, corpus.valid.size() / 1e6, timer.Seconds());
}

}  // namespace

void AddSelfDistillCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "self-distill", "Write a corpus of the target's own continuations of a corpus's documents");
  auto o = std::make_shared<SelfDistillCliOptions>();
  cmd->add_option("--target", o->target, "The target GGUF that writes")->required();
  cmd->add_option("--corpus", o->corpus, "Corpus whose documents' openings are the prompts")
      ->required();
  cmd->add_option("-o,--out", o->out, "Directory of the new corpus (train.txt, valid.txt)")
      ->required();
  cmd->add_option("--tokens", o->tokens, "Tokens to generate for the training part")
      ->capture_default_str();
  cmd->add_option("--valid-tokens", o->valid_tokens,
                  "Tokens for the validation part (default: 5% of --tokens)");
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "Tokens of each document kept as prompt")
      ->capture_default_str();
  cmd->add_option("--max-new", o->distill.max_new_tokens, "Most tokens generated per document")
      ->capture_default_str();
  cmd->add_option("--lanes", o->lanes, "Documents decoded together (one batched forward a token)")
      ->capture_default_str();
  // Temperature 0 by default (greedy, as the paper); above it the filters of every command.
  AddSamplingOptions(*cmd, o->distill.sampling);
  cmd->add_option("--seed", o->distill.sampling.seed, "Seed of sampling at --temp > 0")
      ->capture_default_str();
  AddPositiveThreadsOption(*cmd, o->threads);
  cmd->callback([o] { RunSelfDistill(*o); });
}

}  // namespace grove::cli
