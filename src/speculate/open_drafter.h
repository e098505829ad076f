// A drafter by the name users give it: "ngram" for prompt lookup, or the path of a draft GGUF (same
// vocabulary as the target): a standalone draft model, or a feature drafter trained for this target
// (its file says which, model/drafter_file.h). A draft model shares the target's thread pool, so
// its forwards and the target's never have two sets of workers competing for the cores, and the
// target's context.
#pragma once

#include <memory>
#include <string>

#include "model/model.h"
#include "speculate/drafter.h"

namespace grove {

struct OpenedDrafter {
  std::unique_ptr<Model> model;  // the draft model; null for prompt lookup
  std::unique_ptr<Drafter> drafter;
};

// The drafter of a draft model's forward context, drafting into its sequence `seq`: a
// FeatureDrafter when the file is one, else a ModelDrafter. Throws as their constructors do.
std::unique_ptr<Drafter> MakeModelDrafter(Model& draft, const Model& target, int32_t seq = 0);

// Throws grove::Error naming the problem (a file that does not load, another vocabulary).
OpenedDrafter OpenDrafter(const std::string& name, Model& target);

// What MakeModelDrafter would make of `draft` for `target`, checked as its constructor checks it
// (vocabularies; a feature drafter's target, width and tensors), without a forward context.
DrafterTraits CheckDraftModel(const ModelParameters& draft, const ModelParameters& target);
// Prompt lookup's (speculate/ngram_drafter.h).
DrafterTraits NgramTraits();

}  // namespace grove
