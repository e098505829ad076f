// grove tokenizer-train: learn a byte-level BPE vocabulary from a corpus made by `grove corpus` and
// write it as a vocab-only GGUF. The result is loaded back with grove's own tokenizer to report
// tokens per byte, which also proves the file is usable.
#include <cstdio>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "base/timer.h"
#include "commands.h"
#include "io/gguf.h"
#include "output_path.h"
#include "tokenize/tokenizer.h"
#include "train/bpe_trainer.h"
#include "train/corpus_files.h"

namespace grove::cli {
namespace {

struct TokenizerTrainOptions {
  std::string corpus;
  std::string out;
  int32_t vocab = 3072;
  std::vector<std::string> specials = {"<|endoftext|>"};
};

void RunTokenizerTrain(const TokenizerTrainOptions& o) {
  const std::filesystem::path corpus(o.corpus);
  CheckOutputFile(
      o.out, "-o",
      {.inputs = {(corpus / kCorpusTrainFile).string(), (corpus / kCorpusValidFile).string()}});
  const std::string train = ReadCorpusFile(o.corpus, kCorpusTrainFile);
  const std::string valid = ReadCorpusFile(o.corpus, kCorpusValidFile);
  Timer timer;
  BpeTrainStats stats;
  const std::string_view texts[] = {train};  // the validation part stays unseen
  const BpeVocab vocab =
      TrainBpe(texts, {.vocab_size = o.vocab, .special_tokens = o.specials}, &stats);
  const double train_s = timer.Seconds();
  WriteBpeTokenizerGguf(vocab, o.out);
  std::printf(
      "trained on %zu bytes: %lld pre-tokens (%lld distinct), %lld merges, %zu tokens in %.2f s\n",
      train.size(), static_cast<long long>(stats.pre_tokens),
      static_cast<long long>(stats.distinct_pre_tokens), static_cast<long long>(stats.merges),
      vocab.tokens.size(), train_s);

  auto gguf = GgufFile::Open(o.out);
  auto tok = Tokenizer::FromGguf(*gguf);
  for (const auto& [name, text] :
       {std::pair<const char*, const std::string&>{"train", train}, {"valid", valid}}) {
    Timer encode_timer;
    const std::vector<int32_t> ids = tok->Encode(text, /*add_bos=*/false);
    const bool round_trip = tok->Decode(ids) == text;
    std::printf(
        "%s: %zu tokens, %.3f tokens/byte, %.2f bytes/token, encode %.2f s, round trip %s\n", name,
        ids.size(), static_cast<double>(ids.size()) / static_cast<double>(text.size()),
        static_cast<double>(text.size()) / static_cast<double>(ids.size()), encode_timer.Seconds(),
        round_trip ? "exact" : "FAILED");
    if (!round_trip) Fail("tokenizer: decoding the ", name, " part does not give back the text");
  }
  std::fprintf(stderr, "wrote %s\n", o.out.c_str());
}

}  // namespace

void AddTokenizerTrainCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenizer-train",
                                 "Learn a byte-level BPE tokenizer from a corpus directory");
  auto o = std::make_shared<TokenizerTrainOptions>();
  cmd->add_option("--corpus", o->corpus,
                  "Corpus directory (train.txt, valid.txt from `grove corpus`)")
      ->required();
  cmd->add_option("--vocab", o->vocab, "Vocabulary size, special tokens included")
      ->capture_default_str();
  cmd->add_option("--special", o->specials, "Special (control) tokens; the first is BOS/EOS")
      ->capture_default_str();
  cmd->add_option("-o,--out", o->out, "Output GGUF path")->required();
  cmd->callback([o] { RunTokenizerTrain(*o); });
}

}  // namespace grove::cli
