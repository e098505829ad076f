#include "train/feature_trainer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include "base/error.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "io/gguf.h"
#include "model/drafter_file.h"
#include "model/model.h"
#include "tokenize/tokenizer.h"
#include "train/checkpoint.h"
#include "train/corpus_files.h"
#include "train/drafter_graph.h"
#include "train/gemm.h"
#include "train/train_loop.h"
#include "train/trainer.h"

namespace grove {
namespace {

// The target's features and distributions over a batch of windows, as the drafter's rows need
// them: row r of a window reads token w[r] and the feature f_{r-1} (zero for r = 0, as the first
// position of a sequence at inference), and learns the target's logits and feature at r.
class TargetRows {
 public:
  TargetRows(Model& target, int n_seq, int seq_len)
      : target_(target), n_seq_(n_seq), seq_len_(seq_len) {
    const auto rows = static_cast<std::size_t>(n_seq) * seq_len;
    const auto d = static_cast<std::size_t>(target.config().n_embd);
    tokens.resize(rows);
    features.resize(rows * d);
    next_features.resize(rows * d);
    logits.resize(rows * target.config().n_vocab);
  }

  // windows: n_seq offsets into data of seq_len tokens each.
  void Fill(const std::vector<int32_t>& data, std::span<const int64_t> offsets) {
    const auto d = static_cast<std::size_t>(target_.config().n_embd);
    const auto v = static_cast<std::size_t>(target_.config().n_vocab);
    const auto t = static_cast<std::size_t>(seq_len_);
    for (int b = 0; b < n_seq_; ++b) {
      const std::span<const int32_t> window(data.data() + offsets[static_cast<std::size_t>(b)], t);
      target_.cache(0).Clear();
      batch_.Clear();
      batch_.AddChain(window, 0, 0, /*all_logits=*/true);
      const std::span<const float> out = target_.Forward(batch_);
      const std::span<const float> hidden = target_.hidden_states();
      const std::size_t row0 = static_cast<std::size_t>(b) * t;
      std::copy(window.begin(), window.end(), tokens.begin() + static_cast<std::ptrdiff_t>(row0));
      std::fill_n(features.data() + row0 * d, d, 0.0f);
      std::memcpy(features.data() + (row0 + 1) * d, hidden.data(), (t - 1) * d * sizeof(float));
      std::memcpy(next_features.data() + row0 * d, hidden.data(), t * d * sizeof(float));
      std::memcpy(logits.data() + row0 * v, out.data(), t * v * sizeof(float));
    }
  }

  std::vector<int32_t> tokens;
  std::vector<float> features, next_features, logits;

 private:
  Model& target_;
  int n_seq_, seq_len_;
  Batch batch_;
};

CheckpointSettings FeatureRunSettings(const FeatureTrainOptions& o, const std::string& fingerprint,
                                      int64_t train_tokens, int64_t valid_tokens) {
  CheckpointSettings settings = {
      {"drafter", "feature"},
      {"target_fingerprint", fingerprint},
      {"seed", std::to_string(o.seed)},
      {"batch", std::to_string(o.batch)},
      {"seq_len", std::to_string(o.seq_len)},
      {"logit_weight", FormatDouble(o.logit_weight)},
      {"feature_weight", FormatDouble(o.feature_weight)},
      {"masks", std::to_string(o.masks)},
      {"mask_decay", FormatDouble(o.mask_decay)},
      {"mask_visibility",
       o.visibility == MaskVisibility::kGroupWise ? "group-wise" : "across-groups"},
      {"train_tokens", std::to_string(train_tokens)},
      {"valid_tokens", std::to_string(valid_tokens)},
  };
  for (auto& setting : OptimizerSettings(o.optimizer)) settings.push_back(std::move(setting));
  return settings;
}

GgufValue StringValue(std::string s) {
  GgufValue v;
  v.type = GgufValueType::kString;
  v.string = std::move(s);
  return v;
}

GgufKeyValues DrafterKeys(const DrafterTarget& target, int32_t masks) {
  GgufKeyValues keys = {{kDrafterKindKey, StringValue(masks > 0 ? "parallel" : "feature")},
                        {kDrafterTargetNameKey, StringValue(target.name)},
                        {kDrafterTargetFingerprintKey, StringValue(target.fingerprint)}};
  if (masks > 0) {
    GgufValue k;
    k.type = GgufValueType::kUint32;
    k.scalar = static_cast<uint64_t>(masks);
    keys.emplace_back(kDrafterMasksKey, k);
  }
  return keys;
}

}  // namespace

DrafterTarget DrafterTargetOf(const GgufFile& target) {
  return {target.GetString("general.name", "?"), TargetFingerprint(target)};
}

GgufWriter FeatureDrafterWriter(const ParamLayout& layout, const float* params,
                                const GgufKeyValues& tokenizer, GgmlType type,
                                const std::string& name, const DrafterTarget& target) {
  GgufWriter w = TrainedModelWriter(layout, params, tokenizer, type, name);
  for (const auto& [key, value] : DrafterKeys(target, LayoutMasks(layout))) w.SetValue(key, value);
  return w;
}

std::vector<float> InitFeatureDrafter(const ParamLayout& layout, const ParamLayout& target_layout,
                                      const float* target_params, uint64_t seed) {
  std::vector<float> params = InitParams(layout, seed);
  for (const ParamTensor& t : layout.tensors()) {
    if (!t.frozen) continue;
    const ParamTensor* src = target_layout.Find(t.name);
    GROVE_CHECK(src && src->size == t.size, "the target has no tensor ", t.name, " of its size");
    std::copy_n(target_params + src->offset, t.size, params.data() + t.offset);
  }
  return params;
}

void ValidateFeatureTrainOptions(const FeatureTrainOptions& o) {
  ValidateSharedTrainOptions("train-drafter", o.optimizer, SharedTrainOptionsOf(o));
  auto check = [](bool ok, const char* what, double v) {
    if (!ok) Fail("train-drafter: ", what, " ", v, " is out of range");
  };
  check(o.logit_weight >= 0 && o.logit_weight <= 1e3, "--logit-weight", o.logit_weight);
  check(o.feature_weight >= 0 && o.feature_weight <= 1e3, "--feature-weight", o.feature_weight);
  check(o.masks >= 0 && o.masks <= 64, "--masks", o.masks);
  check(o.masks < o.seq_len, "--masks (at most --seq-len - 1)", o.masks);
  check(o.mask_decay > 0 && o.mask_decay <= 1, "--mask-decay", o.mask_decay);
  if (o.logit_weight == 0 && o.feature_weight == 0)
    Fail("train-drafter: --logit-weight and --feature-weight are both 0: nothing to train");
  if (o.out_dir.empty()) Fail("train-drafter: no run directory (--out)");
  if (o.target_path.empty()) Fail("train-drafter: no target (--target)");
}

namespace {

// The target a drafter learns from: its inference model gives the rows, its f32 copy the frozen
// tensors and the shape, and the corpus is in its tokens.
struct FeatureTarget {
  std::unique_ptr<GgufFile> file;
  LoadedTrainModel f32;
  std::unique_ptr<Model> model;
  CorpusTokens corpus;
};

FeatureTarget LoadFeatureTarget(const FeatureTrainOptions& o,
                                const std::shared_ptr<ThreadPool>& pool) {
  FeatureTarget target;
  target.file = GgufFile::Open(o.target_path);
  target.f32 = LoadTrainModel(*target.file);
  if (target.f32.shape.n_ctx < o.seq_len + 1)
    Fail("train-drafter: the target's context ", target.f32.shape.n_ctx,
         " is shorter than --seq-len + 1 = ", o.seq_len + 1);
  target.model = Model::Load(o.target_path,
                             {.pool = pool, .n_ctx = o.seq_len + 1, .max_batch = o.seq_len + 1});
  if (!target.model->tokenizer()) {
    Fail("train-drafter: target '", o.target_path, "' has no tokenizer");
  }
  if (!target.file->Has("tokenizer.ggml.eos_token_id"))
    Fail("train-drafter: target '", o.target_path, "' has no end-of-text token");
  const auto eos = static_cast<int32_t>(target.file->GetUint("tokenizer.ggml.eos_token_id"));
  target.corpus = TokenizeCorpusParts(*target.model->tokenizer(), o.corpus_dir, eos, o.seq_len + 1,
                                      "train-drafter", StrCat("one window of ", o.seq_len + 1));
  return target;
}

// A step's windows through the target and the drafter's gradient, and the validation loss with
// the share of rows where the drafter's argmax is the target's, by depth (depth 1: the real rows;
// depth j + 1: mask j's rows); computed with the state's current parameters.
class DrafterSteps {
 public:
  DrafterSteps(const FeatureTrainOptions& o, const FeatureTarget& target, DrafterGraph& graph,
               const std::vector<float>& params)
      : o_(o),
        corpus_(target.corpus),
        graph_(graph),
        params_(params),
        n_vocab_(target.f32.shape.n_vocab),
        rows_(*target.model, o.batch, o.seq_len),
        offsets_(static_cast<std::size_t>(o.batch)) {}

  double Gradient(int64_t step, std::vector<float>& grads) {
    BatchOffsets(o_.seed, step, static_cast<int64_t>(corpus_.train.size()), o_.seq_len, offsets_);
    rows_.Fill(corpus_.train, offsets_);
    const DrafterLoss loss = Forward();
    if (std::isfinite(loss.total)) graph_.Backward(params_.data(), grads.data());
    return loss.total;
  }

  double ValidationLoss(std::vector<double>* by_depth) {
    const std::vector<int32_t>& valid = corpus_.valid;
    const int32_t V = n_vocab_;
    double sum = 0.0;
    std::vector<int64_t> agree(static_cast<std::size_t>(o_.masks) + 1, 0), seen(agree.size(), 0);
    for (int32_t e = 0; e < o_.eval_batches; ++e) {
      ValidationOffsets(e, o_.eval_batches, static_cast<int64_t>(valid.size()), o_.seq_len,
                        offsets_);
      rows_.Fill(valid, offsets_);
      sum += Forward().total;
      for (int r = 0; r < graph_.rows(); ++r) {
        const float* a = graph_.logits() + static_cast<std::size_t>(r) * V;
        const float* b = rows_.logits.data() + static_cast<std::size_t>(graph_.LabelRow(r)) * V;
        const std::size_t d = static_cast<std::size_t>(graph_.DepthOfRow(r)) - 1;
        agree[d] += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
        ++seen[d];
      }
    }
    by_depth->clear();
    for (std::size_t d = 0; d < agree.size(); ++d)
      by_depth->push_back(seen[d] ? static_cast<double>(agree[d]) / seen[d] : NAN);
    return sum / o_.eval_batches;
  }

 private:
  DrafterLoss Forward() {
    return graph_.Forward(params_.data(), rows_.tokens.data(), rows_.features.data(),
                          rows_.logits.data(), rows_.next_features.data());
  }

  const FeatureTrainOptions& o_;
  const CorpusTokens& corpus_;
  DrafterGraph& graph_;
  const std::vector<float>& params_;
  const int32_t n_vocab_;
  TargetRows rows_;
  std::vector<int64_t> offsets_;
};

}  // namespace

TrainResult TrainFeatureDrafter(const FeatureTrainOptions& options,
                                const std::function<void(const TrainProgress&)>& progress,
                                const std::atomic<bool>* stop) {
  ValidateFeatureTrainOptions(options);
  const FeatureTrainOptions& o = options;
  auto pool = std::make_shared<ThreadPool>(o.threads);
  SetGemmThreads(1);
  const FeatureTarget target = LoadFeatureTarget(o, pool);
  const auto n_train = static_cast<int64_t>(target.corpus.train.size());
  const auto n_valid = static_cast<int64_t>(target.corpus.valid.size());
  const ParamLayout layout = DrafterLayout(target.f32.shape, o.masks);
  DrafterGraph graph(layout, o.batch, o.seq_len,
                     {.visibility = o.visibility,
                      .mask_decay = o.mask_decay,
                      .logit_weight = o.logit_weight,
                      .feature_weight = o.feature_weight},
                     pool.get());
  AdamW adam(layout, o.optimizer);
  const GgufKeyValues drafter_keys = DrafterKeys(DrafterTargetOf(*target.file), o.masks);
  const auto settings = FeatureRunSettings(o, TargetFingerprint(*target.file), n_train, n_valid);
  std::filesystem::create_directories(o.out_dir);
  TrainResult result = StartTrainResult(o.out_dir, n_train, n_valid, layout);
  RunState state;
  if (std::filesystem::exists(result.checkpoint)) {
    state = LoadCheckpoint(result.checkpoint, layout, target.f32.tokenizer, o.target_path, settings,
                           adam);
    result.resumed = true;
  } else {
    state.params =
        InitFeatureDrafter(layout, ParamLayout(target.f32.shape), target.f32.params.data(), o.seed);
  }

  DrafterSteps steps(o, target, graph, state.params);
  const TrainLoopHooks hooks{
      .gradient = [&](int64_t step,
                      std::vector<float>& grads) { return steps.Gradient(step, grads); },
      .validate =
          [&](TrainProgress& p) {
            p.valid_loss = steps.ValidationLoss(&p.valid_agreement_by_depth);
            p.valid_agreement = p.valid_agreement_by_depth[0];
          },
      .save =
          [&] {
            SaveCheckpoint(result.checkpoint, layout, state, adam, target.f32.tokenizer, o.name,
                           settings, drafter_keys);
          }};
  result.interrupted = RunTrainLoop(o.optimizer,
                                    {.eval_every = o.eval_every,
                                     .checkpoint_every = o.checkpoint_every,
                                     .tokens_per_step = static_cast<int64_t>(o.batch) * o.seq_len,
                                     .command = "train-drafter"},
                                    state, adam, pool.get(), hooks, progress, stop);
  result.step = state.step;
  result.last_valid_loss = state.last_valid_loss;
  result.elapsed_s = state.elapsed_s;
  return result;
}

void ExportFeatureDrafter(const std::string& checkpoint, const std::string& out, GgmlType type,
                          const std::string& name) {
  auto file = GgufFile::Open(checkpoint);
  if (ReadDrafterKind(*file) == DrafterKind::kModel)
    Fail("export: '", checkpoint, "' is not a feature drafter's checkpoint");
  const LoadedTrainModel model = LoadTrainModel(*file);
  const ParamLayout layout = DrafterLayout(model.shape, ReadDrafterMasks(*file));
  const std::vector<float> params = ReadLayoutParams(*file, layout);
  GgufWriter w = FeatureDrafterWriter(
      layout, params.data(), model.tokenizer, type,
      name.empty() ? file->GetString("general.name", "grove-feature-drafter") : name,
      {file->GetString(kDrafterTargetNameKey), file->GetString(kDrafterTargetFingerprintKey)});
  if (file->Has("grove.train.step"))
    w.SetUint64("grove.train.step", file->GetUint("grove.train.step"));
  w.WriteFile(out);
}

}  // namespace grove
