// grove corpus: write the synthetic training corpus (stories, arithmetic, Game of 24) and print its
// statistics. Format and grammar: docs/corpus.md.
#include <cstdio>
#include <string>

#include "base/error.h"
#include "base/timer.h"
#include "commands.h"
#include "output_path.h"
#include "train/corpus.h"
#include "train/corpus_files.h"

namespace grove::cli {
namespace {

struct CorpusCommandOptions {
  std::string out;
  uint64_t seed = 1;
  int64_t words = 1'000'000;
};

void PrintPart(const char* name, const CorpusPartStats& part) {
  for (int k = 0; k < kCorpusKindCount; ++k) {
    const std::string kind(CorpusKindName(static_cast<CorpusKind>(k)));
    std::printf("| %-5s | %-14s | %9lld | %10lld | %11lld |\n", name, kind.c_str(),
                static_cast<long long>(part.documents[k]), static_cast<long long>(part.words[k]),
                static_cast<long long>(part.bytes[k]));
  }
  std::printf("| %-5s | %-14s | %9lld | %10lld | %11lld |\n", name, "all",
              static_cast<long long>(part.total_documents()),
              static_cast<long long>(part.total_words()),
              static_cast<long long>(part.total_bytes()));
}

void RunCorpus(const CorpusCommandOptions& o) {
  CheckOutputDirectory(o.out, "--out", CorpusFiles());
  Timer timer;
  // Streamed to the files document by document: the corpus is never whole in memory.
  const CorpusStats stats = WriteCorpus({.seed = o.seed, .target_words = o.words}, o.out);
  std::printf("| part  | kind           | documents |      words |       bytes |\n");
  std::printf("|-------|----------------|-----------|------------|-------------|\n");
  PrintPart("train", stats.train);
  PrintPart("valid", stats.valid);
  std::printf("distinct words: %lld\n", static_cast<long long>(stats.distinct_words));
  std::fprintf(stderr, "wrote %s/{train,valid}.txt (seed %llu) in %.1f s\n", o.out.c_str(),
               static_cast<unsigned long long>(o.seed), timer.Seconds());
}

}  // namespace

void AddCorpusCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "corpus", "Write the synthetic training corpus (stories, arithmetic, Game of 24)");
  auto o = std::make_shared<CorpusCommandOptions>();
  cmd->add_option("-o,--out", o->out, "Output directory (gets train.txt and valid.txt)")
      ->required();
  cmd->add_option("--seed", o->seed, "Seed of the documents (the lexicon is fixed)")
      ->capture_default_str();
  cmd->add_option(
         "--tokens", o->words,
         "Approximate size in whitespace-separated words (generation stops after the document "
         "that reaches it)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000'000}));
  cmd->callback([o] { RunCorpus(*o); });
}

}  // namespace grove::cli
