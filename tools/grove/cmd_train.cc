// grove train: train a model on a corpus (or distill one from a teacher), resumably; grove export:
// write a checkpoint (of `grove train` or `grove train-drafter`) as a model or drafter file of a
// given weight type.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "base/error.h"
#include "commands.h"
#include "engine_options.h"
#include "io/ggml_type.h"
#include "io/gguf.h"
#include "model/drafter_file.h"
#include "option_checks.h"
#include "output_path.h"
#include "progress_line.h"
#include "tokenize/tokenizer.h"
#include "train/corpus_files.h"
#include "train/feature_trainer.h"
#include "train/gemm.h"
#include "train/model_file.h"
#include "train/trainer.h"
#include "training_options.h"
#include "training_run.h"

namespace grove::cli {
namespace {

GgmlType ExportType(const std::string& name) {
  const auto type = ParseGgmlType(name);
  if (!type || !IsTrainerExportType(*type)) {
    Fail("export: type '", name, "' is not one of f32, f16, bf16, q8_0");
  }
  return *type;
}

void ExportCheckpoint(const std::string& checkpoint, const std::string& out,
                      const std::string& type_name, const std::string& name, bool force) {
  const GgmlType type = ExportType(type_name);
  auto file = GgufFile::Open(checkpoint);
  CheckOutputFile(out, "-o", {.inputs = {checkpoint}, .force = &force});
  if (ReadDrafterKind(*file) != DrafterKind::kModel) {
    // A checkpoint of `grove train-drafter`: the plain-model writer would drop its fusion, masks
    // and target.
    file.reset();
    ExportFeatureDrafter(checkpoint, out, type, name);
    std::fprintf(stderr, "wrote %s (drafter, %s, %.2f MB)\n", out.c_str(),
                 std::string(GgmlTypeName(type)).c_str(),
                 static_cast<double>(std::filesystem::file_size(out)) / 1e6);
    return;
  }
  const LoadedTrainModel model = LoadTrainModel(*file);
  const ParamLayout layout(model.shape);
  const std::string model_name = name.empty() ? file->GetString("general.name", "grove") : name;
  GgufWriter w = TrainedModelWriter(layout, model.params.data(), model.tokenizer, type, model_name);
  if (file->Has("grove.train.step"))
    w.SetUint64("grove.train.step", file->GetUint("grove.train.step"));
  w.WriteFile(out);
  std::fprintf(stderr, "wrote %s (%s, %s, %.1f M parameters, %.2f MB)\n", out.c_str(),
               model_name.c_str(), std::string(GgmlTypeName(type)).c_str(),
               static_cast<double>(layout.total()) / 1e6,
               static_cast<double>(std::filesystem::file_size(out)) / 1e6);
}

struct TrainCliOptions {
  TrainOptions train;
  int64_t log_every = 10;
  std::string export_path;
  std::string export_type = "q8_0";
  bool untied = false;
};

// The run's log.tsv, opened at the first step: Train() checks the corpus and the tokenizer, and
// creates the run directory, before it; a refused run leaves nothing behind.
class TrainLog {
 public:
  explicit TrainLog(const std::string& out_dir)
      : path_((std::filesystem::path(out_dir) / "log.tsv").string()) {}
  bool is_open() const { return log_.is_open(); }
  void Open() {
    const bool new_log = !std::filesystem::exists(path_);
    log_.open(path_, std::ios::app);
    if (!log_) Fail("train: cannot write '", path_, "'");
    if (new_log) log_ << "step\tloss\tvalid_loss\tlr\tgrad_norm\ttokens_per_s\telapsed_s\n";
  }
  void Write(const TrainProgress& p) {
    log_ << p.step << '\t' << p.loss << '\t'
         << (std::isnan(p.valid_loss) ? std::string("") : std::to_string(p.valid_loss)) << '\t'
         << p.lr << '\t' << p.grad_norm << '\t' << p.tokens_per_s << '\t' << p.elapsed_s << '\n';
  }
  void Flush() { log_.flush(); }

 private:
  std::string path_;
  std::ofstream log_;
};

void AnnounceTraining(const TrainOptions& o) {
  std::fprintf(stderr, "train: %s, batch %d x %d tokens, %lld steps, %d threads, %s%s%s\n",
               DescribeTrainShape(o.shape).c_str(), o.batch, o.seq_len,
               static_cast<long long>(o.optimizer.steps), o.threads, GemmBackendName().c_str(),
               o.teacher_path.empty() ? "" : ", distilling from ", o.teacher_path.c_str());
  if (!o.init_path.empty())
    std::fprintf(stderr, "train: fine-tuning from %s\n", o.init_path.c_str());
}

// A step's progress line: rewritten in place on a terminal, every --log-every steps (and at each
// validation and the last step) in a log.
void PrintTrainProgress(const TrainProgress& p, int64_t log_every, bool tty) {
  char valid[32] = "";
  if (!std::isnan(p.valid_loss)) std::snprintf(valid, sizeof(valid), " valid %.4f", p.valid_loss);
  const bool line = p.step % log_every == 0 || !std::isnan(p.valid_loss) || p.step == p.steps;
  if (!tty && !line) return;
  std::fprintf(
      stderr,
      "%sstep %lld/%lld  loss %.4f%s  lr %.2e  |g| %.2f  %.0f tok/s  elapsed %s  ETA %s%s%s",
      tty ? "\r\033[K" : "", static_cast<long long>(p.step), static_cast<long long>(p.steps),
      p.loss, valid, p.lr, p.grad_norm, p.tokens_per_s, FormatDuration(p.elapsed_s).c_str(),
      FormatDuration(p.eta_s).c_str(), p.checkpointed ? "  [saved]" : "", tty && !line ? "" : "\n");
  std::fflush(stderr);
}

void RunTrain(TrainCliOptions& c) {
  TrainOptions& o = c.train;
  o.shape.tied_output = !c.untied;
  // Everything that can be refused is refused before hours of training, and before the run
  // directory or its log exist.
  ValidateTrainOptions(o);
  CheckOutputDirectory(o.out_dir, "-o", {"log.tsv"});  // the log is appended to
  if (!c.export_path.empty()) ExportType(c.export_type);
  const std::filesystem::path export_dir = CheckExportPath(
      c.export_path,
      {.inputs = {o.tokenizer_path, o.teacher_path, o.init_path, CheckpointPath(o.out_dir)}});
  TrainLog log(o.out_dir);
  const bool tty = isatty(fileno(stderr));
  o.shape.n_vocab = TokenizerVocabSize(TokenizerKeys(*GgufFile::Open(o.tokenizer_path)));
  // The shape to print: the --init model's (Train reads its weights and checks it).
  if (!o.init_path.empty()) o.shape = TrainShapeOf(ConfigFromGguf(*GgufFile::Open(o.init_path)));
  bool announced_stop = false;
  auto progress = [&](const TrainProgress& p) {
    if (!log.is_open()) {  // the first step: Train() accepted the corpus and the tokenizer
      AnnounceTraining(o);
      log.Open();
    }
    log.Write(p);
    if (StopRequested() && !announced_stop) {
      std::fprintf(stderr, "%sinterrupted: saving the checkpoint after step %lld\n",
                   tty ? "\n" : "", static_cast<long long>(p.step));
      announced_stop = true;
    }
    PrintTrainProgress(p, c.log_every, tty);
  };
  const TrainResult r =
      RunStoppable([&](const std::atomic<bool>* stop) { return Train(o, progress, stop); });
  log.Flush();
  std::fprintf(
      stderr,
      "%s at step %lld of %lld (%s%.2f M parameters, %lld training tokens); checkpoint %s\n",
      r.interrupted ? "stopped" : "done", static_cast<long long>(r.step),
      static_cast<long long>(o.optimizer.steps), r.resumed ? "resumed, " : "",
      static_cast<double>(r.n_params) / 1e6, static_cast<long long>(r.train_tokens),
      r.checkpoint.c_str());
  FailIfInterrupted(r, "train");
  if (!c.export_path.empty()) {
    CreateExportDirectory(export_dir);
    ExportCheckpoint(r.checkpoint, c.export_path, c.export_type, o.name, false);
  }
}

}  // namespace

namespace {

// An option under `group` in the help, shown with its default: every shape and optimisation
// option is one.
template <typename T>
void AddGroupedOption(CLI::App* cmd, const char* group, const char* name, T& value,
                      const char* help) {
  cmd->add_option(name, value, help)->capture_default_str()->group(group);
}

// The model's shape; --init takes the shape of its model instead.
void AddShapeOptions(CLI::App* cmd, TrainCliOptions& c, CLI::Option* init) {
  TrainShape& s = c.train.shape;
  const char* shape = "Model shape";
  AddGroupedOption(cmd, shape, "--dim", s.n_embd, "Model width");
  AddGroupedOption(cmd, shape, "--layers", s.n_layer, "Transformer blocks");
  AddGroupedOption(cmd, shape, "--heads", s.n_head, "Attention heads");
  AddGroupedOption(cmd, shape, "--ffn", s.n_ff, "SwiGLU hidden width");
  AddGroupedOption(cmd, shape, "--ctx", s.n_ctx, "Context length written to the model");
  AddGroupedOption(cmd, shape, "--rope-base", s.rope_freq_base, "RoPE frequency base");
  cmd->add_flag("--untied", c.untied,
                "Separate output matrix instead of reusing the token embedding")
      ->group(shape);
  for (const char* name :
       {"--dim", "--layers", "--heads", "--ffn", "--ctx", "--rope-base", "--untied"}) {
    init->excludes(cmd->get_option(name));
  }
}

void AddOptimisationOptions(CLI::App* cmd, TrainOptions& o) {
  const char* opt = "Optimisation";
  AddGroupedOption(cmd, opt, "--steps", o.optimizer.steps, "Optimizer steps");
  AddGroupedOption(cmd, opt, "--warmup", o.optimizer.warmup, "Warm-up steps");
  AddGroupedOption(cmd, opt, "--lr", o.optimizer.lr, "Peak learning rate");
  AddGroupedOption(cmd, opt, "--min-lr-ratio", o.optimizer.min_lr_ratio,
                   "Final learning rate / peak");
  AddGroupedOption(cmd, opt, "--weight-decay", o.optimizer.weight_decay,
                   "AdamW weight decay (matrices)");
  AddGroupedOption(cmd, opt, "--beta1", o.optimizer.beta1, "AdamW beta1");
  AddGroupedOption(cmd, opt, "--beta2", o.optimizer.beta2, "AdamW beta2");
  AddGroupedOption(cmd, opt, "--clip", o.optimizer.clip, "Max gradient norm (0: no clipping)");
  AddGroupedOption(cmd, opt, "--batch", o.batch, "Sequences per step");
  AddGroupedOption(cmd, opt, "--seq-len", o.seq_len, "Tokens per sequence");
  AddGroupedOption(cmd, opt, "--seed", o.seed, "Seed of initialisation and batch order");
}

}  // namespace

void AddTrainCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "train", "Train a model on a corpus, or distill one from a teacher (resumable)");
  auto c = std::make_shared<TrainCliOptions>();
  TrainOptions& o = c->train;
  o.shape = {.n_embd = 256, .n_layer = 4, .n_head = 4, .n_ff = 768, .n_ctx = 512};
  cmd->add_option("--corpus", o.corpus_dir,
                  "Corpus directory (train.txt, valid.txt from `grove corpus`)")
      ->required();
  cmd->add_option("--tokenizer", o.tokenizer_path, "Tokenizer GGUF (from `grove tokenizer-train`)")
      ->required();
  cmd->add_option("-o,--out", o.out_dir,
                  "Run directory: checkpoint.gguf and log.tsv; an existing checkpoint is resumed")
      ->required();
  cmd->add_option("--teacher", o.teacher_path,
                  "Distill from this model (GGUF with the same vocabulary)");
  auto* init = cmd->add_option("--init", o.init_path,
                               "Fine-tune: start from this model's weights (a GGUF with the same "
                               "vocabulary, e.g. a draft, on a corpus `grove serve --record` "
                               "kept); its shape replaces the shape options");
  cmd->add_option("--name", o.name, "general.name of the model files")->capture_default_str();
  AddShapeOptions(cmd, *c, init);
  AddOptimisationOptions(cmd, o);
  AddTrainingRunOptions(cmd, *c, "model");
  cmd->callback([c] { RunTrain(*c); });
}

void AddExportCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "Write a training checkpoint as a model file");
  struct Options {
    std::string checkpoint, out, type = "q8_0", name;
    bool force = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("checkpoint", o->checkpoint,
                  "RUN/checkpoint.gguf (or any model the trainer can load)")
      ->required();
  cmd->add_option("-o,--out", o->out, "Output GGUF")->required();
  cmd->add_option("--type", o->type, "Weight type: f32, f16, bf16, q8_0")->capture_default_str();
  cmd->add_option("--name", o->name, "general.name (default: the checkpoint's)");
  cmd->add_flag("--force", o->force, "Replace OUT even if it is a read-only file");
  cmd->callback([o] {
    CheckOutputFile(o->out, "-o", {.inputs = {o->checkpoint}, .force = &o->force});
    ExportCheckpoint(o->checkpoint, o->out, o->type, o->name, o->force);
  });
}

void AddEvalCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "eval",
      "Loss of a model (f32, f16, bf16 or q8_0 weights) on a corpus part, and a draft's greedy "
      "agreement with it");
  struct Options {
    std::string model, draft, corpus, part = "valid";
    int32_t windows = 64, seq_len = 256;
  };
  auto o = std::make_shared<Options>();
  AddModelOption(*cmd, o->model, ModelRole::kModel);
  AddDraftOption(*cmd, o->draft, DraftRole::kModel);
  cmd->add_option("--corpus", o->corpus, "Corpus directory")->required();
  cmd->add_option("--part", o->part, "train or valid")
      ->capture_default_str()
      ->check(CLI::IsMember({"train", "valid"}));
  cmd->add_option("--windows", o->windows,
                  "Windows of text evaluated (rounded up to a multiple of 4)")
      ->capture_default_str();
  cmd->add_option("--seq-len", o->seq_len, "Tokens per window")->capture_default_str();
  cmd->callback([o] {
    auto file = GgufFile::Open(o->model);
    auto tokenizer = Tokenizer::FromGguf(*file);
    if (!file->Has("tokenizer.ggml.eos_token_id"))
      Fail("eval: '", o->model, "' has no end-of-text token");
    const auto eos = static_cast<int32_t>(file->GetUint("tokenizer.ggml.eos_token_id"));
    const std::vector<int32_t> tokens = TokenizeCorpus(
        *tokenizer,
        ReadCorpusFile(o->corpus, o->part == "train" ? kCorpusTrainFile : kCorpusValidFile), eos);
    const int32_t most = MaxEvalWindows(static_cast<int64_t>(tokens.size()), o->seq_len);
    if (o->windows > most) {
      std::fprintf(stderr,
                   "[grove] eval: the %s text holds %d windows of %d tokens; evaluating %d, not "
                   "%d\n",
                   o->part.c_str(), most, o->seq_len, most, o->windows);
    }
    ProgressLine progress;
    const EvalResult r = EvaluateModels(
        o->model, o->draft, tokens, o->seq_len, o->windows, [&](int32_t done, int32_t total) {
          progress.Update(done, total, StrCat("evaluating: window ", done, "/", total));
        });
    std::printf("model %s: %s loss %.4f (perplexity %.2f) over %lld positions\n", o->model.c_str(),
                o->part.c_str(), r.loss, std::exp(r.loss), static_cast<long long>(r.positions));
    if (!o->draft.empty()) {
      std::printf(
          "draft %s: %s loss %.4f (perplexity %.2f); greedy agreement with the model %.4f\n",
          o->draft.c_str(), o->part.c_str(), r.draft_loss, std::exp(r.draft_loss), r.agreement);
    }
  });
}

}  // namespace grove::cli
