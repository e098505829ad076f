#include "train/trainer.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>

#include "base/error.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "io/gguf.h"
#include "tokenize/tokenizer.h"
#include "train/checkpoint.h"
#include "train/corpus_files.h"
#include "train/gemm.h"
#include "train/model_file.h"
#include "train/train_loop.h"

namespace grove {
namespace {

constexpr const char* kCheckpointFile = "checkpoint.gguf";

// Everything that shapes the result besides the model shape; a resumed run must agree on all of it.
CheckpointSettings RunSettings(const TrainOptions& o, int64_t train_tokens, int64_t valid_tokens) {
  CheckpointSettings settings = {
      {"seed", std::to_string(o.seed)},
      {"batch", std::to_string(o.batch)},
      {"seq_len", std::to_string(o.seq_len)},
      {"teacher",
       o.teacher_path.empty() ? "" : std::filesystem::path(o.teacher_path).filename().string()},
      {"init", o.init_path.empty() ? "" : std::filesystem::path(o.init_path).filename().string()},
      {"train_tokens", std::to_string(train_tokens)},
      {"valid_tokens", std::to_string(valid_tokens)},
  };
  for (auto& setting : OptimizerSettings(o.optimizer)) settings.push_back(std::move(setting));
  return settings;
}

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

void FillBatch(const std::vector<int32_t>& data, std::span<const int64_t> offsets, int32_t seq_len,
               int32_t* tokens, int32_t* targets) {
  for (std::size_t b = 0; b < offsets.size(); ++b) {
    const int32_t* src = data.data() + offsets[b];
    std::copy(src, src + seq_len, tokens + b * static_cast<std::size_t>(seq_len));
    std::copy(src + 1, src + seq_len + 1, targets + b * static_cast<std::size_t>(seq_len));
  }
}

}  // namespace

std::string CheckpointPath(const std::string& out_dir) {
  return (std::filesystem::path(out_dir) / kCheckpointFile).string();
}

TrainResult StartTrainResult(const std::string& out_dir, int64_t train_tokens, int64_t valid_tokens,
                             const ParamLayout& layout) {
  TrainResult result;
  result.checkpoint = CheckpointPath(out_dir);
  result.train_tokens = train_tokens;
  result.valid_tokens = valid_tokens;
  result.n_params = layout.total();
  for (const ParamTensor& t : layout.tensors()) {
    if (t.frozen) result.n_params -= t.size;
  }
  return result;
}

void ValidateTrainOptions(const TrainOptions& o) {
  ValidateSharedTrainOptions("train", o.optimizer, SharedTrainOptionsOf(o));
  if (o.out_dir.empty()) Fail("train: no run directory (--out)");
}

std::vector<int32_t> TokenizeCorpus(const Tokenizer& tokenizer, std::string_view text,
                                    int32_t eos) {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3);
  for (std::string_view doc : SplitDocuments(text)) {
    out.push_back(eos);
    const std::vector<int32_t> ids = tokenizer.Encode(doc, /*add_bos=*/false);
    out.insert(out.end(), ids.begin(), ids.end());
  }
  return out;
}

CorpusTokens TokenizeCorpusParts(const Tokenizer& tokenizer, const std::string& corpus_dir,
                                 int32_t eos, int64_t min_tokens, std::string_view command,
                                 std::string_view too_few) {
  CorpusTokens parts{TokenizeCorpus(tokenizer, ReadCorpusFile(corpus_dir, kCorpusTrainFile), eos),
                     TokenizeCorpus(tokenizer, ReadCorpusFile(corpus_dir, kCorpusValidFile), eos)};
  for (const auto& [part, n] :
       {std::pair{"training", parts.train.size()}, std::pair{"validation", parts.valid.size()}}) {
    if (static_cast<int64_t>(n) < min_tokens) {
      Fail(command, ": the ", part, " part of '", corpus_dir, "' has ", n, " tokens, fewer than ",
           too_few);
    }
  }
  return parts;
}

int64_t BatchOffset(uint64_t seed, int64_t step, int32_t b, int64_t n_tokens, int32_t seq_len) {
  const uint64_t range = static_cast<uint64_t>(n_tokens - seq_len);  // offsets 0 .. n - seq_len - 1
  const uint64_t h =
      Mix(Mix(seed ^ 0x5851f42d4c957f2dull) ^
          Mix(static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(b)));
  return static_cast<int64_t>(h % range);
}

void BatchOffsets(uint64_t seed, int64_t step, int64_t n_tokens, int32_t seq_len,
                  std::span<int64_t> offsets) {
  for (std::size_t b = 0; b < offsets.size(); ++b)
    offsets[b] = BatchOffset(seed, step, static_cast<int32_t>(b), n_tokens, seq_len);
}

void ValidationOffsets(int32_t e, int32_t n_batches, int64_t n_tokens, int32_t seq_len,
                       std::span<int64_t> offsets) {
  const auto batch = static_cast<int64_t>(offsets.size());
  const int64_t count = static_cast<int64_t>(n_batches) * batch;
  const int64_t span = n_tokens - seq_len - 1;
  for (int64_t b = 0; b < batch; ++b)
    offsets[static_cast<std::size_t>(b)] = (static_cast<int64_t>(e) * batch + b) * span / count;
}

namespace {

// The tokenizer's keys (carried into the model file) and the corpus's two parts as tokens.
struct TrainText {
  GgufKeyValues tokenizer_keys;
  std::vector<int32_t> train;
  std::vector<int32_t> valid;
};

TrainText LoadTrainText(const TrainOptions& o) {
  auto tok_file = GgufFile::Open(o.tokenizer_path);
  TrainText text{.tokenizer_keys = TokenizerKeys(*tok_file)};
  auto tokenizer = Tokenizer::FromGguf(*tok_file);
  if (!tok_file->Has("tokenizer.ggml.eos_token_id"))
    Fail("train: tokenizer '", o.tokenizer_path, "' has no end-of-text token");
  const auto eos = static_cast<int32_t>(tok_file->GetUint("tokenizer.ggml.eos_token_id"));
  CorpusTokens parts = TokenizeCorpusParts(*tokenizer, o.corpus_dir, eos, o.seq_len + 2, "train",
                                           StrCat("one sequence of ", o.seq_len + 1));
  text.train = std::move(parts.train);
  text.valid = std::move(parts.valid);
  return text;
}

// A model file of the run (--init, --teacher), refused unless it has the tokenizer's vocabulary.
LoadedTrainModel LoadSameVocabulary(const std::string& path, std::string_view what,
                                    const TrainOptions& o, const GgufKeyValues& tokenizer_keys) {
  auto file = GgufFile::Open(path);
  LoadedTrainModel model = LoadTrainModel(*file);
  if (TokenTexts(model.tokenizer) != TokenTexts(tokenizer_keys)) {
    Fail("train: ", what, " '", path, "' has another vocabulary than tokenizer '", o.tokenizer_path,
         "'");
  }
  return model;
}

// The teacher of distillation (--teacher) and the graph that computes its logits.
struct Teacher {
  explicit Teacher(LoadedTrainModel loaded, const TrainOptions& o, ThreadPool* pool)
      : model(std::move(loaded)), layout(model.shape), graph(layout, o.batch, o.seq_len, pool) {}
  LoadedTrainModel model;
  ParamLayout layout;
  TrainGraph graph;
};

std::unique_ptr<Teacher> LoadTeacher(const TrainOptions& o, const GgufKeyValues& tokenizer_keys,
                                     ThreadPool* pool) {
  if (o.teacher_path.empty()) return nullptr;
  LoadedTrainModel model = LoadSameVocabulary(o.teacher_path, "teacher", o, tokenizer_keys);
  if (model.shape.n_ctx < o.seq_len)
    Fail("train: teacher's context ", model.shape.n_ctx, " is shorter than --seq-len ", o.seq_len);
  return std::make_unique<Teacher>(std::move(model), o, pool);
}

// Where the run starts: the checkpoint's state when resuming, else --init's weights or fresh ones.
RunState StartState(const TrainOptions& o, const ParamLayout& layout, const TrainText& text,
                    const CheckpointSettings& settings, std::optional<LoadedTrainModel> init,
                    AdamW& adam, TrainResult& result) {
  RunState state;
  if (std::filesystem::exists(result.checkpoint)) {
    state = LoadCheckpoint(result.checkpoint, layout, text.tokenizer_keys, o.tokenizer_path,
                           settings, adam);
    result.resumed = true;
  } else if (init) {
    state.params = std::move(init->params);
  } else {
    state.params = InitParams(layout, o.seed);
  }
  return state;
}

// A step's batch and its gradient (against the teacher's logits when distilling), and the
// validation loss, computed into the run's buffers with the state's current parameters.
class LanguageModelSteps {
 public:
  LanguageModelSteps(const TrainOptions& o, const TrainText& text, TrainGraph& graph,
                     Teacher* teacher, const std::vector<float>& params)
      : o_(o),
        text_(text),
        graph_(graph),
        teacher_(teacher),
        params_(params),
        tokens_(static_cast<std::size_t>(graph.rows())),
        targets_(tokens_.size()),
        offsets_(static_cast<std::size_t>(o.batch)) {}

  double Gradient(int64_t step, std::vector<float>& grads) {
    BatchOffsets(o_.seed, step, static_cast<int64_t>(text_.train.size()), o_.seq_len, offsets_);
    FillBatch(text_.train, offsets_, o_.seq_len, tokens_.data(), targets_.data());
    const float* teacher_logits = nullptr;
    if (teacher_) {
      teacher_->graph.Forward(teacher_->model.params.data(), tokens_.data(), nullptr);
      teacher_logits = teacher_->graph.logits();
    }
    const double loss =
        graph_.Forward(params_.data(), tokens_.data(), targets_.data(), teacher_logits);
    if (std::isfinite(loss)) graph_.Backward(params_.data(), grads.data());
    return loss;
  }

  double ValidationLoss() {
    const std::vector<int32_t>& valid = text_.valid;
    double sum = 0.0;
    for (int32_t e = 0; e < o_.eval_batches; ++e) {
      ValidationOffsets(e, o_.eval_batches, static_cast<int64_t>(valid.size()), o_.seq_len,
                        offsets_);
      FillBatch(valid, offsets_, o_.seq_len, tokens_.data(), targets_.data());
      sum += graph_.Forward(params_.data(), tokens_.data(), targets_.data());
    }
    return sum / o_.eval_batches;
  }

 private:
  const TrainOptions& o_;
  const TrainText& text_;
  TrainGraph& graph_;
  Teacher* teacher_;  // null: no distillation
  const std::vector<float>& params_;
  std::vector<int32_t> tokens_, targets_;
  std::vector<int64_t> offsets_;
};

}  // namespace

TrainResult Train(const TrainOptions& options,
                  const std::function<void(const TrainProgress&)>& progress,
                  const std::atomic<bool>* stop) {
  ValidateTrainOptions(options);
  TrainOptions o = options;
  // The trainer's threads are this pool's; OpenBLAS runs single-threaded inside it
  // (train/parallel.h says why).
  ThreadPool pool(o.threads);
  SetGemmThreads(1);
  const TrainText text = LoadTrainText(o);
  o.shape.n_vocab = TokenizerVocabSize(text.tokenizer_keys);
  // Model (fine-tuned from --init: its shape and weights), optimizer, teacher.
  std::optional<LoadedTrainModel> init;
  if (!o.init_path.empty()) {
    init = LoadSameVocabulary(o.init_path, "--init", o, text.tokenizer_keys);
    o.shape = init->shape;
  }
  const ParamLayout layout(o.shape);
  const std::unique_ptr<Teacher> teacher = LoadTeacher(o, text.tokenizer_keys, &pool);
  TrainGraph graph(layout, o.batch, o.seq_len, &pool);
  AdamW adam(layout, o.optimizer);
  const auto n_train = static_cast<int64_t>(text.train.size());
  const auto n_valid = static_cast<int64_t>(text.valid.size());
  const auto settings = RunSettings(o, n_train, n_valid);
  std::filesystem::create_directories(o.out_dir);
  TrainResult result = StartTrainResult(o.out_dir, n_train, n_valid, layout);
  RunState state = StartState(o, layout, text, settings, std::move(init), adam, result);

  LanguageModelSteps steps(o, text, graph, teacher.get(), state.params);
  const TrainLoopHooks hooks{
      .gradient = [&](int64_t step,
                      std::vector<float>& grads) { return steps.Gradient(step, grads); },
      .validate = [&](TrainProgress& p) { p.valid_loss = steps.ValidationLoss(); },
      .save =
          [&] {
            SaveCheckpoint(result.checkpoint, layout, state, adam, text.tokenizer_keys, o.name,
                           settings);
          }};
  result.interrupted = RunTrainLoop(o.optimizer,
                                    {.eval_every = o.eval_every,
                                     .checkpoint_every = o.checkpoint_every,
                                     .tokens_per_step = static_cast<int64_t>(graph.rows())},
                                    state, adam, &pool, hooks, progress, stop);
  result.step = state.step;
  result.last_valid_loss = state.last_valid_loss;
  result.elapsed_s = state.elapsed_s;
  return result;
}

namespace {

constexpr int32_t kEvalBatch = 4;

// A model to evaluate and the graph that runs it on kEvalBatch windows of seq_len tokens.
struct EvalModel {
  EvalModel(const std::string& path, int32_t seq_len)
      : model(LoadTrainModel(*GgufFile::Open(path))),
        layout(CheckedShape(path, seq_len)),
        graph(layout, kEvalBatch, seq_len) {}

  const TrainShape& CheckedShape(const std::string& path, int32_t seq_len) const {
    if (model.shape.n_ctx < seq_len)
      Fail("eval: '", path, "' has a context of ", model.shape.n_ctx, " < ", seq_len);
    return model.shape;
  }

  LoadedTrainModel model;
  ParamLayout layout;
  TrainGraph graph;
};

// The rows of the batch where both models' most likely next token is the same.
int64_t CountAgreement(const EvalModel& model, const EvalModel& draft, int32_t seq_len) {
  const int32_t V = model.model.shape.n_vocab;
  auto argmax = [V](const float* row) { return std::max_element(row, row + V) - row; };
  int64_t agree = 0;
  for (int64_t row = 0; row < static_cast<int64_t>(kEvalBatch) * seq_len; ++row) {
    agree += argmax(model.graph.logits() + row * V) == argmax(draft.graph.logits() + row * V);
  }
  return agree;
}

}  // namespace

int32_t MaxEvalWindows(int64_t n_tokens, int32_t seq_len) {
  const int64_t side_by_side = std::max<int64_t>(1, (n_tokens - 1) / std::max(seq_len, 1));
  const int64_t rounded = (side_by_side + kEvalBatch - 1) / kEvalBatch * kEvalBatch;
  return static_cast<int32_t>(std::min<int64_t>(rounded, std::numeric_limits<int32_t>::max() / 2));
}

EvalResult EvaluateModels(const std::string& model_path, const std::string& draft_path,
                          const std::vector<int32_t>& tokens, int32_t seq_len, int32_t windows,
                          const std::function<void(int32_t, int32_t)>& progress) {
  if (windows < 1 || seq_len < 2) Fail("eval: need at least one window of two tokens");
  constexpr int32_t kBatch = kEvalBatch;
  if (static_cast<int64_t>(tokens.size()) < seq_len + 2)
    Fail("eval: the text has fewer than ", seq_len + 2, " tokens");
  windows = std::min(windows, MaxEvalWindows(static_cast<int64_t>(tokens.size()), seq_len));
  windows = (windows + kBatch - 1) / kBatch * kBatch;  // whole batches: every window counted once
  EvalModel model(model_path, seq_len);
  std::unique_ptr<EvalModel> draft;
  if (!draft_path.empty()) {
    draft = std::make_unique<EvalModel>(draft_path, seq_len);
    if (TokenTexts(draft->model.tokenizer) != TokenTexts(model.model.tokenizer)) {
      Fail("eval: draft '", draft_path, "' has another vocabulary than '", model_path, "'");
    }
  }
  const int32_t V = model.model.shape.n_vocab;
  for (int32_t t : tokens) {
    if (t < 0 || t >= V) Fail("eval: token ", t, " is outside the vocabulary of ", V);
  }
  double loss = 0, draft_loss = 0;
  int64_t agree = 0;
  int32_t batches = 0;
  const int64_t span = static_cast<int64_t>(tokens.size()) - seq_len - 1;
  std::vector<int32_t> in(static_cast<std::size_t>(kBatch) * seq_len), out(in.size());
  std::vector<int64_t> offsets;
  for (int32_t first = 0; first < windows; first += kBatch, ++batches) {
    offsets.clear();
    for (int32_t b = 0; b < kBatch; ++b)
      offsets.push_back(static_cast<int64_t>(first + b) * span / windows);
    FillBatch(tokens, offsets, seq_len, in.data(), out.data());
    loss += model.graph.Forward(model.model.params.data(), in.data(), out.data());
    if (draft) {
      draft_loss += draft->graph.Forward(draft->model.params.data(), in.data(), out.data());
      agree += CountAgreement(model, *draft, seq_len);
    }
    if (progress) progress(first + kBatch, windows);
  }
  EvalResult r;
  r.windows = windows;
  r.positions = static_cast<int64_t>(windows) * seq_len;
  r.loss = loss / batches;
  if (draft) {
    r.draft_loss = draft_loss / batches;
    r.agreement = static_cast<double>(agree) / static_cast<double>(r.positions);
  }
  return r;
}

}  // namespace grove
