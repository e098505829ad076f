#include "speculate/open_drafter.h"

#include "model/drafter_file.h"
#include "speculate/feature_drafter.h"
#include "speculate/model_drafter.h"
#include "speculate/ngram_drafter.h"

namespace grove {

std::unique_ptr<Drafter> MakeModelDrafter(Model& draft, const Model& target, int32_t seq) {
  if (ReadDrafterKind(draft.gguf()) != DrafterKind::kModel)
    return std::make_unique<FeatureDrafter>(draft, target, seq);
  return std::make_unique<ModelDrafter>(draft, target, seq);
}

OpenedDrafter OpenDrafter(const std::string& name, Model& target) {
  OpenedDrafter opened;
  if (name == "ngram") {
    opened.drafter = std::make_unique<NgramDrafter>(target.config().n_vocab, target.n_ctx());
    return opened;
  }
  const ModelOptions options{
      .pool = target.shared_pool(), .n_ctx = target.n_ctx(), .max_batch = target.max_batch()};
  opened.model = Model::Load(name, options);
  opened.drafter = MakeModelDrafter(*opened.model, target);
  return opened;
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

DrafterTraits NgramTraits() { return {"ngram", true}; }

}  // namespace grove
