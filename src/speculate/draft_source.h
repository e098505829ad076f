// Where each sequence's drafter comes from, opened once from the name users give it (--draft): the
// path of a draft GGUF (a standalone draft model, or a feature or parallel drafter trained for this
// target: its file says which, model/drafter_file.h), "ngram" for prompt lookup
// (speculate/ngram_drafter.h), "suffix" for suffix drafting over the sequence and every output
// before it (speculate/suffix_drafter.h; one SuffixStore shared by all the source's drafters), or
// several of these joined by '+', mixed into one drafter (speculate/drafter_mixture.h). A session,
// or each lane of a scheduler, makes its own Drafter from it; what a speculation policy needs to
// know of them (DrafterTraits) is known without one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "speculate/drafter.h"
#include "speculate/suffix_store.h"

namespace grove {

class DraftSource {
 public:
  // Loads a draft GGUF's parameters onto `pool`'s workers and checks them against `target` (as
  // FromModel), or names a drafter without a model. Throws grove::Error naming the problem.
  // store: the outputs a suffix drafter among them starts from (null: a new, empty store), so that
  // a drafter opened anew (a server's swap) keeps what the old one learnt.
  // loaded: the parameters of the draft model `name` names, if the caller loaded them already
  // (from the path ModelPath(name) gives): checked and used instead of loading the file again.
  // backing: how a draft model's file is held (io/mapped_file.h); a server that swaps drafters
  // copies it, so that a file rewritten in place under it changes nothing it serves.
  static DraftSource Open(const std::string& name, const ModelParameters& target, ThreadPool& pool,
                          std::shared_ptr<SuffixStore> store = nullptr,
                          std::shared_ptr<const ModelParameters> loaded = nullptr,
                          FileBacking backing = FileBacking::kMapped);
  // A draft model's parameters, checked as the drafter's constructor checks them (vocabularies;
  // a feature drafter's target, width and tensors).
  static DraftSource FromModel(std::shared_ptr<const ModelParameters> draft,
                               const ModelParameters& target);
  static DraftSource PromptLookup();
  // store: the outputs the drafters share (null: a new, empty store).
  static DraftSource Suffix(std::shared_ptr<SuffixStore> store = nullptr);
  // Several drafters as one (speculate/drafter_mixture.h): at most one draft model among them,
  // none that reads the target's features. Open makes one of a name such as "DRAFT.gguf+suffix"
  // (a name that is no file and holds '+').
  static DraftSource Mixture(std::vector<DraftSource> members);
  // The names a --draft value joins with '+' (one name: not a mixture). A file's name is never
  // split, nor a path holding '+' (~/c++/models/d.gguf+suffix: the file and "suffix").
  static std::vector<std::string> MixtureMembers(const std::string& name);
  // The path of the draft model file `name` names (itself, or a mixture's member that is neither
  // 'ngram' nor 'suffix'); empty when it names none.
  static std::string ModelPath(const std::string& name);

  const DrafterTraits& traits() const { return traits_; }
  // The draft model's parameters (a mixture's member's); null for drafters without a model.
  const std::shared_ptr<const ModelParameters>& model() const { return model_; }
  // A feature or parallel drafter: it reads the target's hidden states (Drafter).
  bool reads_target_features() const { return reads_target_features_; }
  // The suffix drafters' shared store (a mixture's member's); null for other drafters.
  const std::shared_ptr<SuffixStore>& suffix_store() const { return store_; }

  // The drafter of one sequence of `target`. A draft model's forward context is made with
  // `options` and handed over in *draft_model, which must outlive the drafter (it stays null for
  // drafters without a model).
  std::unique_ptr<Drafter> Make(const Model& target, const ModelOptions& options,
                                std::unique_ptr<Model>* draft_model) const;

 private:
  DraftSource() = default;

  DrafterTraits traits_;
  std::vector<DraftSource> members_;  // a mixture's
  std::shared_ptr<const ModelParameters> model_;
  std::shared_ptr<SuffixStore> store_;
  bool reads_target_features_ = false;
};

// One session's drafter by its name (DraftSource::Open), a draft model sharing the target's
// thread pool (its forwards and the target's never have two sets of workers competing for the
// cores) and its context.
struct OpenedDrafter {
  std::unique_ptr<Model> model;  // the draft model; null for drafters without one
  std::unique_ptr<Drafter> drafter;
  std::shared_ptr<SuffixStore> suffix_store;  // a suffix drafter's outputs; null without one
};
// `device`: where a draft model computes; kAuto: where the target does (DraftSource::Make).
// loaded: as DraftSource::Open's.
OpenedDrafter OpenDrafter(const std::string& name, Model& target,
                          ComputeDevice device = ComputeDevice::kAuto,
                          std::shared_ptr<const ModelParameters> loaded = nullptr);

// The drafter of a draft model's forward context, drafting into its sequence `seq`: a
// FeatureDrafter when the file is one, else a ModelDrafter. Throws as their constructors do.
std::unique_ptr<Drafter> MakeModelDrafter(Model& draft, const Model& target, int32_t seq = 0);

// What MakeModelDrafter would make of `draft` for `target`, checked as its constructor checks it
// (vocabularies; a feature drafter's target, width and tensors), without a forward context.
DrafterTraits CheckDraftModel(const ModelParameters& draft, const ModelParameters& target);

}  // namespace grove
