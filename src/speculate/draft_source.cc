#include "speculate/draft_source.h"

#include <filesystem>
#include <string_view>

#include "base/error.h"
#include "model/drafter_file.h"
#include "speculate/drafter_mixture.h"
#include "speculate/feature_drafter.h"
#include "speculate/model_drafter.h"
#include "speculate/ngram_drafter.h"
#include "speculate/suffix_drafter.h"

namespace grove {
namespace {

// The --draft names of the drafters without a file.
constexpr std::string_view kPromptLookupName = "ngram";
constexpr std::string_view kSuffixName = "suffix";

// Whether a file of that name exists; a name no file can have (longer than a path may be) is
// none, not an exception.
bool FileExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

}  // namespace

std::unique_ptr<Drafter> MakeModelDrafter(Model& draft, const Model& target, int32_t seq) {
  if (ReadDrafterKind(draft.gguf()) != DrafterKind::kModel)
    return std::make_unique<FeatureDrafter>(draft, target, seq);
  return std::make_unique<ModelDrafter>(draft, target, seq);
}

DrafterTraits CheckDraftModel(const ModelParameters& draft, const ModelParameters& target) {
  if (ReadDrafterKind(draft.gguf()) == DrafterKind::kModel) {
    CheckPairVocabulary(draft, target);
    return {"draft-model", false};
  }
  const FeatureDrafterTensors own = ReadFeatureDrafterTensors(draft.gguf(), target.gguf());
  CheckSameVocabulary(draft, target);
  return {own.masks > 0 ? "parallel" : "feature", false};
}

DraftSource DraftSource::Open(const std::string& name, const ModelParameters& target,
                              ThreadPool& pool, std::shared_ptr<SuffixStore> store,
                              std::shared_ptr<const ModelParameters> loaded, FileBacking backing) {
  if (name.empty()) Fail("the draft is an empty name: give a GGUF path, 'ngram' or 'suffix'");
  if (const std::vector<std::string> names = MixtureMembers(name); names.size() > 1) {
    // Refused before any member is opened (each lane would make every one of them).
    if (names.size() > DrafterMixture::kMaxMembers) {
      Fail("the draft '", name.substr(0, 64), name.size() > 64 ? "...'" : "'", " joins ",
           names.size(), " drafters with '+': a mixture holds at most ",
           DrafterMixture::kMaxMembers);
    }
    std::vector<DraftSource> members;
    members.reserve(names.size());
    const std::string loaded_path = loaded ? ModelPath(name) : "";
    for (const std::string& member : names)
      members.push_back(
          Open(member, target, pool, store, member == loaded_path ? loaded : nullptr, backing));
    return Mixture(std::move(members));
  }
  if (name == kPromptLookupName) return PromptLookup();
  if (name == kSuffixName) return Suffix(std::move(store));
  if (!loaded)
    loaded = ModelParameters::Load(name, ModelOptions{}.group_weights, pool, {}, backing);
  return FromModel(std::move(loaded), target);
}

std::string DraftSource::ModelPath(const std::string& name) {
  for (const std::string& member : MixtureMembers(name)) {
    if (member != kPromptLookupName && member != kSuffixName) return member;
  }
  return "";
}

std::vector<std::string> DraftSource::MixtureMembers(const std::string& name) {
  if (name.find('+') == std::string::npos || FileExists(name)) return {name};
  std::vector<std::string> pieces;
  std::size_t start = 0;
  for (std::size_t plus; (plus = name.find('+', start)) != std::string::npos; start = plus + 1)
    pieces.push_back(name.substr(start, plus - start));
  pieces.push_back(name.substr(start));
  // Pieces enough for several mixtures are not joined and looked up one by one (a name of
  // thousands would take that many file lookups of ever longer names): Open refuses so many.
  if (pieces.size() > 8 * DrafterMixture::kMaxMembers) return pieces;
  // A path may hold '+' itself (~/c++/models/d.gguf+suffix): pieces are joined back until they
  // name a drafter or an existing file. When that leaves a tail naming neither, the plain split
  // stands, so that the error names the piece that is missing.
  const auto names_member = [](const std::string& piece) {
    return piece == kPromptLookupName || piece == kSuffixName || FileExists(piece);
  };
  std::vector<std::string> names;
  std::string current;
  bool open = false;  // current holds a piece not yet taken as a member
  for (const std::string& piece : pieces) {
    if (open) current += '+';
    current += piece;
    open = true;
    if (names_member(current)) {
      names.push_back(current);
      current.clear();
      open = false;
    }
  }
  if (open) return pieces;
  return names;
}

DraftSource DraftSource::FromModel(std::shared_ptr<const ModelParameters> draft,
                                   const ModelParameters& target) {
  if (!draft) Fail("draft source: no draft model");
  DraftSource source;
  source.traits_ = CheckDraftModel(*draft, target);
  source.reads_target_features_ = ReadDrafterKind(draft->gguf()) != DrafterKind::kModel;
  source.model_ = std::move(draft);
  return source;
}

DraftSource DraftSource::PromptLookup() {
  DraftSource source;
  source.traits_ = {std::string(kPromptLookupName), true};
  return source;
}

DraftSource DraftSource::Suffix(std::shared_ptr<SuffixStore> store) {
  DraftSource source;
  source.traits_ = {std::string(kSuffixName), true};
  source.store_ = store ? std::move(store) : std::make_shared<SuffixStore>();
  return source;
}

DraftSource DraftSource::Mixture(std::vector<DraftSource> members) {
  if (members.size() < 2) Fail("a drafter mixture needs at least two drafters");
  if (members.size() > DrafterMixture::kMaxMembers) {
    Fail("a drafter mixture of ", members.size(), " drafters: at most ",
         DrafterMixture::kMaxMembers);
  }
  DraftSource source;
  // Its rows rank the members' candidates, or with a draft model among them are that model's
  // distribution when children are sampled (speculate/drafter_mixture.h).
  source.traits_.deterministic = true;
  for (const DraftSource& m : members) {
    if (!m.members_.empty()) Fail("drafter mixture: a member is itself a mixture");
    if (m.reads_target_features_) {
      Fail("drafter mixture: the ", m.traits_.name,
           " drafter reads the target's features at every step and cannot be mixed; mix draft "
           "models, 'ngram' and 'suffix'");
    }
    if (m.model_) {
      if (source.model_) Fail("drafter mixture: at most one draft model");
      source.model_ = m.model_;
    }
    if (m.store_) source.store_ = m.store_;
    source.traits_.deterministic = source.traits_.deterministic && m.traits_.deterministic;
    source.traits_.name += (source.traits_.name.empty() ? "" : "+") + m.traits_.name;
  }
  source.members_ = std::move(members);
  return source;
}

namespace {

// Whether a draft model is worth a GPU beside its target's. A forward on the GPU costs at least
// its launches, about 75 us a layer (measured: the bundled 8-layer target's t(1) is 0.6 ms on an
// H200), which a CPU spends reading about 4 MB of weights: a draft with less per layer (the bundled
// 2.6 MB draft: chain:4 2.02x with it on the CPU, 1.45x on the GPU, docs/cuda.md) drafts faster
// on the CPU; a 1B-shape draft (77 MB a layer) is bound by its weights, which the GPU reads
// faster.
bool FillsGpu(const ModelParameters& draft) {
  constexpr uint64_t kBytesPerLayer = uint64_t{4} << 20;
  return draft.weight_bytes() >= kBytesPerLayer * static_cast<uint64_t>(draft.config().n_layer);
}

}  // namespace

std::unique_ptr<Drafter> DraftSource::Make(const Model& target, const ModelOptions& options,
                                           std::unique_ptr<Model>* draft_model) const {
  if (!members_.empty()) {
    std::vector<std::unique_ptr<Drafter>> drafters;
    for (const DraftSource& m : members_) drafters.push_back(m.Make(target, options, draft_model));
    return std::make_unique<DrafterMixture>(std::move(drafters));
  }
  if (model_) {
    // options.device kAuto: where the target computes (on the GPU a deep tree's draft levels are
    // its latency), or on the CPU, with a warning, if the GPU cannot take the draft. A feature
    // drafter's forward starts from the target's features, which the GPU path does not take yet:
    // it stays on the CPU.
    ModelOptions draft_options = options;
    if (reads_target_features_) {
      draft_options.device = ComputeDevice::kCpu;
    } else if (options.device == ComputeDevice::kAuto) {
      draft_options.device = target.device() == ComputeDevice::kCuda && FillsGpu(*model_)
                                 ? ComputeDevice::kAuto
                                 : ComputeDevice::kCpu;
    }
    // The target's cache type on the CPU; the GPU keeps floats (kv_cache.h).
    if (draft_options.device != ComputeDevice::kCpu) draft_options.cache_type = KvCacheType::kF32;
    *draft_model = Model::Create(model_, draft_options);
    return MakeModelDrafter(**draft_model, target);
  }
  if (store_)
    return std::make_unique<SuffixDrafter>(target.config().n_vocab, target.n_ctx(), store_);
  return std::make_unique<NgramDrafter>(target.config().n_vocab, target.n_ctx());
}

OpenedDrafter OpenDrafter(const std::string& name, Model& target, ComputeDevice device,
                          std::shared_ptr<const ModelParameters> loaded) {
  const DraftSource source = DraftSource::Open(name, *target.parameters(), *target.shared_pool(),
                                               nullptr, std::move(loaded));
  OpenedDrafter opened;
  opened.suffix_store = source.suffix_store();
  opened.drafter = source.Make(target,
                               {.pool = target.shared_pool(),
                                .n_ctx = target.n_ctx(),
                                .max_batch = target.max_batch(),
                                .device = device,
                                .cache_type = target.cache_type()},
                               &opened.model);
  return opened;
}

}  // namespace grove
