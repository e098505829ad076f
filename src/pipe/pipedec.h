// PipeDec (arXiv 2504.04104, digest 002): the target's layers split into pipeline stages, the
// draft beside them growing a dynamic prediction tree by one layer per timestep, and every stage
// working on a different tree layer in the same timestep. The last stage computes the target's
// token after the root; when the root has a child with that token every unit prunes to that
// child's subtree and the next token comes one timestep later; otherwise the pipeline refills.
// Every emitted token is the target's own (greedy, or sampled with the draw plain decoding makes
// at that position), so the output is plain decoding's, token for token.
//
// This runs every unit in one thread, timestep by timestep (the paper's compute, sync and
// transmission phases in order), which is what the tests and the virtual-clock simulator need;
// the log says what each unit processed in each timestep. Transports that put the units on
// threads or MPI ranks drive the same units.
//
// And the two baselines through the same stages: plain pipeline parallelism (PP, one token per
// pass through all stages) and static-tree speculation (STPP, the paper's baseline after
// SpecInfer: the draft fills a fixed tree, one pass of all stages verifies it).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/model_parameters.h"
#include "pipe/stage_split.h"
#include "sample/sampler.h"
#include "speculate/token_tree.h"

namespace grove {

struct PipelineOptions {
  std::vector<LayerRange> stages;  // of the target, in order, covering every layer
  SamplerParams sampling{.temperature = 0.0f};
  uint64_t sequence = 0;  // RNG key of the sequence (as plain decoding's)
  int32_t n_predict = 128;
  bool stop_at_eog = true;
  int n_threads = 1;  // of the forward contexts (one pool, shared: the units run one at a time)
  // PipeDec: w, the most nodes in a tree layer, and c, the most children of a node (§3.3).
  int32_t width = 32;
  int32_t children = 16;
  // STPP: the static tree (a tree_plan.h shape spec, e.g. kconfig:4,2,2,1 or chain:5).
  std::string static_tree = "kconfig:4,2,2,1";
};

// What one timestep did: tokens each target stage processed (0: idle), the draft's, and whether
// the last stage verified (a sync) and the root had the target's token as a child (a hit).
struct PipelineTimestep {
  std::vector<int32_t> stage_rows;
  int32_t draft_rows = 0;
  int32_t draft_levels = 0;  // STPP: draft forwards of its draft timestep
  bool synced = false;
  bool hit = false;
};

struct PipelineResult {
  std::vector<int32_t> tokens;  // generated, the stop token included
  int64_t timesteps = 0;        // after the prefill
  int64_t syncs = 0;
  int64_t hits = 0;
  std::vector<PipelineTimestep> log;

  double hit_rate() const { return syncs ? static_cast<double>(hits) / syncs : 0.0; }
};

// Throws grove::Error before anything runs on a bad split (a gap, an overlap, a layer range out of
// the model), fewer than 2 stages, a draft of another vocabulary, w or c < 1, or a prompt and
// generation the context cannot hold with a full tree.
// Tree tokens a PipeDec stage may hold at once, and the widest tree (w) whose stages hold it beside
// the prompt and the generation in the target's context (0: none fits).
int32_t PipeDecTreeTokens(int32_t n_stages, int32_t width);
int32_t PipeDecMaxWidth(const ModelParameters& target, int32_t prompt_tokens, int32_t n_predict,
                        int32_t n_stages);

PipelineResult RunPipeDec(std::shared_ptr<const ModelParameters> target,
                          std::shared_ptr<const ModelParameters> draft,
                          std::span<const int32_t> prompt, const PipelineOptions& options);

// PP: each token passes through every stage in turn (a timestep per stage).
PipelineResult RunPlainPipeline(std::shared_ptr<const ModelParameters> target,
                                std::span<const int32_t> prompt, const PipelineOptions& options);

// The static tree of options.static_tree, or grove::Error when the spec is not a static tree.
TokenTree StaticPipelineTree(const PipelineOptions& options);

// STPP: per iteration the draft fills the static tree (a draft forward per level), every stage in
// turn processes the whole tree (a timestep per stage, the tree's tokens in each), and the target's
// own draws walk it from the root as far as a child carries them (target-sample acceptance: the
// tokens are plain decoding's). log: the draft's timestep (draft_rows: nodes drafted), then the
// stages'.
PipelineResult RunStaticTreePipeline(std::shared_ptr<const ModelParameters> target,
                                     std::shared_ptr<const ModelParameters> draft,
                                     std::span<const int32_t> prompt,
                                     const PipelineOptions& options);

}  // namespace grove
