// PipeDec (arXiv 2504.04104, digest 002): the target's layers split into pipeline stages, the
// draft beside them growing a dynamic prediction tree by one layer per timestep, and every stage
// working on a different tree layer in the same timestep. The last stage computes the target's
// token after the root; when the root has a child with that token every unit prunes to that
// child's subtree and the next token comes one timestep later; otherwise the pipeline refills.
// Every emitted token is the target's own (greedy, or sampled with the draw plain decoding makes
// at that position), so the output is plain decoding's, token for token.
//
// Each unit is a rank (pipe_transport.h: the draft rank 0, target stage k at rank k + 1) and every
// rank runs the same loop, timestep by timestep: the paper's compute, synchronization and
// transmission phases. Every rank keeps the same prediction tree and the same bookkeeping of
// which nodes each stage holds, from what is broadcast (the draft's candidates for each new layer,
// the last stage's tokens), and computes only its own unit; hidden rows go from stage to stage.
// So every rank returns the same result, and the log says what each unit processed in each
// timestep, which the virtual clock (pipeline_clock.h) prices. The Run* functions without a
// transport run every rank as a thread of this process (in_process_transport.h).
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
#include "pipe/pipe_transport.h"
#include "pipe/stage_split.h"
#include "sample/sampler.h"
#include "speculate/token_tree.h"

namespace grove {

struct PipelineOptions {
  std::vector<LayerRange> stages;  // of the target, in order, covering every layer
  // PipeDec: stages per group, in order (§3.1): a group's stages process the same tree layer one
  // after another in a timestep, so the tree is as deep as there are groups. Empty: a stage each.
  std::vector<int32_t> groups;
  SamplerParams sampling{.temperature = 0.0f};
  uint64_t sequence = 0;  // RNG key of the sequence (as plain decoding's)
  int32_t n_predict = 128;
  bool stop_at_eog = true;
  int n_threads = 1;  // of each rank's forward context
  // How long a rank waits for a message before it reports the sender dead or stuck.
  int32_t timeout_ms = 60000;
  // PipeDec: w, the most nodes in a tree layer, and c, the most children of a node (§3.3).
  int32_t width = 32;
  int32_t children = 16;
  // STPP: the static tree (a tree_plan.h shape spec, e.g. kconfig:4,2,2,1 or chain:5).
  std::string static_tree = "kconfig:4,2,2,1";
};

// What one timestep did: tokens each target stage (PipeDec: each group) processed (0: idle), the
// draft's, and whether
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
  std::vector<int32_t> groups;  // stages per entry of a timestep's stage_rows
  double decode_seconds = 0.0;  // wall clock on this rank, after the prompt
  // Where this rank's decode_seconds went: its unit's forwards (the draft rank's STPP forwards
  // with their tree building), waiting for messages, and the rest (tree and cache bookkeeping,
  // sampling, sending).
  struct RankTimes {
    double forward = 0.0, wait = 0.0, other = 0.0;
  } times;

  double hit_rate() const { return syncs ? static_cast<double>(hits) / syncs : 0.0; }
};

// Tree tokens a PipeDec stage may hold at once, and the widest tree (w) whose stages hold it beside
// the prompt and the generation in the target's context (0: none fits), for a tree as deep as
// there are groups. Fails, saying why, for fewer than 2 groups.
int32_t PipeDecTreeTokens(int32_t n_groups, int32_t width);
int32_t PipeDecMaxWidth(const ModelParameters& target, int32_t prompt_tokens, int32_t n_predict,
                        int32_t n_groups);

// The ranks of a run: the draft (rank 0, the paper's S) and target stage k at rank k + 1.
inline constexpr int32_t kDraftRank = 0;
constexpr int32_t StageRank(int32_t stage) { return stage + 1; }
int32_t PipelineRankCount(const PipelineOptions& options);

// Which run, for the functions that take one.
enum class PipelineRunKind { kPlain, kStaticTree, kPipeDec };
const char* PipelineRunName(PipelineRunKind kind);

// Every run throws grove::Error on every rank before anything runs on a bad split (a gap, an
// overlap, a layer range out of the model), fewer than 2 stages, groups that do not cover the
// stages, a draft of another vocabulary, w or c < 1, or a prompt and generation the context cannot
// hold with a full tree; and PipeTransportError when another rank fails or stops answering.
//
// This rank's part of a run over `transport` (PipelineRankCount(options) ranks). target and draft:
// the parameters this rank runs (a stage rank needs the target's, the draft rank the draft's;
// both ranks check both configurations). Every rank returns the same result, except
// decode_seconds.
PipelineResult RunPipelineRank(PipelineRunKind kind, PipeTransport& transport,
                               const std::shared_ptr<const ModelParameters>& target,
                               const std::shared_ptr<const ModelParameters>& draft,
                               std::span<const int32_t> prompt, const PipelineOptions& options);
// Every rank a thread of this process; the draft rank's result.
PipelineResult RunPipelineInProcess(PipelineRunKind kind,
                                    const std::shared_ptr<const ModelParameters>& target,
                                    const std::shared_ptr<const ModelParameters>& draft,
                                    std::span<const int32_t> prompt,
                                    const PipelineOptions& options);

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
