#include "pipe/pipedec.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/error.h"
#include "base/named.h"
#include "base/timer.h"
#include "model/model.h"
#include "pipe/in_process_transport.h"
#include "pipe/pipeline_stages.h"
#include "pipe/prediction_tree.h"
#include "pipe/tree_cache.h"
#include "speculate/model_drafter.h"
#include "tokenize/tokenizer.h"

namespace grove {
namespace {

// The draft unit (the paper's S): the whole draft model, processing the same tree layer as the
// first stage and keeping each node's top-c candidates until the node is pruned.
class TreeDraft {
 public:
  TreeDraft(Model& model, int32_t children) : model_(model), children_(children) {
    tree_.emplace(model_.cache(0), model_.cache(0).length());
  }

  TreeCache& tree() { return *tree_; }
  void RunLayer(const PredictionTree& tree, std::span<const int64_t> nodes) {
    batch_.Clear();
    tree_->AppendLayer(tree, nodes, /*want_logits=*/true, batch_);
    const int32_t first_slot = model_.cache(0).length();
    const std::span<const float> logits = model_.Forward(batch_);
    tree_->Placed(nodes, first_slot);
    const auto n_vocab = static_cast<std::size_t>(model_.config().n_vocab);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const std::span<const float> row = logits.subspan(i * n_vocab, n_vocab);
      // log q from the draft's raw softmax (temperature 1): only the ranking matters (§8.3).
      const float max = *std::max_element(row.begin(), row.end());
      double sum = 0.0;
      for (float v : row) sum += std::exp(static_cast<double>(v - max));
      const double log_z = max + std::log(sum);
      TopTokens(row, children_, -std::numeric_limits<float>::infinity(), top_);
      std::vector<LeafCandidate>& out = candidates_[nodes[i]];
      out.clear();
      for (int32_t token : top_) {
        out.push_back({token, static_cast<float>(row[static_cast<std::size_t>(token)] - log_z)});
      }
    }
  }
  // The candidates of every node of `leaves` as a message: ints [n_leaves, then per leaf its count
  // and tokens], floats the log-probs in the same order; ints [-1] when a leaf has none yet.
  PipeMessage CandidatesOf(std::span<const int64_t> leaves) const {
    PipeMessage m;
    m.ints.push_back(static_cast<int32_t>(leaves.size()));
    for (int64_t id : leaves) {
      const auto it = candidates_.find(id);
      if (it == candidates_.end()) return {{-1}, {}};
      m.ints.push_back(static_cast<int32_t>(it->second.size()));
      for (const LeafCandidate& c : it->second) {
        m.ints.push_back(c.token);
        m.floats.push_back(c.log_prob);
      }
    }
    return m;
  }
  void Forget(const PredictionTree& tree) {
    std::erase_if(candidates_, [&](const auto& entry) { return !tree.contains(entry.first); });
  }

 private:
  Model& model_;
  int32_t children_;
  std::optional<TreeCache> tree_;
  std::unordered_map<int64_t, std::vector<LeafCandidate>> candidates_;
  std::vector<int32_t> top_;
  Batch batch_;
};

// The candidate lists of a TreeDraft::CandidatesOf message, or nothing.
std::optional<std::vector<std::vector<LeafCandidate>>> ReadCandidates(const PipeMessage& m) {
  if (m.ints.empty() || m.ints[0] < 0) return std::nullopt;
  std::vector<std::vector<LeafCandidate>> out(static_cast<std::size_t>(m.ints[0]));
  std::size_t i = 1, f = 0;
  for (auto& leaf : out) {
    const int32_t n = m.ints.at(i++);
    for (int32_t j = 0; j < n; ++j) leaf.push_back({m.ints.at(i++), m.floats.at(f++)});
  }
  return out;
}

// Drops the rows of pruned nodes from `nodes` and, when given, from its hidden rows, in place.
void KeepLiveRows(const PredictionTree& tree, bool miss, std::vector<int64_t>& nodes,
                  std::vector<float>* hidden, std::size_t n_embd) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < nodes.size() && !miss; ++i) {
    if (!tree.contains(nodes[i])) continue;
    if (hidden) {
      std::copy_n(hidden->begin() + i * n_embd, n_embd, hidden->begin() + kept * n_embd);
    }
    nodes[kept++] = nodes[i];
  }
  nodes.resize(kept);
  if (hidden) hidden->resize(kept * n_embd);
}

std::vector<int32_t> GroupSizes(const PipelineOptions& o) {
  if (o.groups.empty()) return std::vector<int32_t>(o.stages.size(), 1);
  int64_t total = 0;
  for (int32_t g : o.groups) {
    if (g < 1) Fail("pipedec: a group of ", g, " stages");
    total += g;
  }
  if (total != static_cast<int64_t>(o.stages.size())) {
    Fail("pipedec: the groups hold ", total, " stages; the run has ", o.stages.size());
  }
  return o.groups;
}

void CheckDraft(const ModelParameters& target, const ModelParameters& draft) {
  CheckSameVocabularySize(draft.config(), target.config());
}

// The groups of a PipeDec run, checked with its options and draft.
std::vector<int32_t> CheckPipeDecRun(const ModelParameters& target, const ModelParameters& draft,
                                     const PipelineOptions& o) {
  if (o.stages.size() < 2) Fail("pipedec: needs at least 2 stages, not ", o.stages.size());
  if (o.width < 1 || o.children < 1) {
    Fail("pipedec: tree width ", o.width, " and children ", o.children, " must be >= 1");
  }
  if (o.width > kDefaultMaxBatch) Fail("pipedec: tree width ", o.width, " > ", kDefaultMaxBatch);
  CheckDraft(target, draft);
  std::vector<int32_t> groups = GroupSizes(o);
  if (groups.size() < 2) Fail("pipedec: needs at least 2 groups, not ", groups.size());
  return groups;
}

// One rank of a PipeDec run: every timestep each group computes the tree layer that reached it
// (the draft with the first group), the last stage's root logits decide the next token, every
// unit prunes its tree to the hit child (or drops it on a miss), and each group's output moves
// one group on.
class PipeDecRun {
 public:
  PipeDecRun(PipeTransport& transport, const std::shared_ptr<const ModelParameters>& target,
             const std::shared_ptr<const ModelParameters>& draft, std::span<const int32_t> prompt,
             const PipelineOptions& o, std::vector<int32_t> groups, int32_t n_ctx)
      : o_(o),
        groups_(std::move(groups)),
        ng_(groups_.size()),
        sampler_(o.sampling),
        unit_(transport, target, draft, prompt, o, n_ctx, sampler_),
        net_(unit_.transport()),
        k_(unit_.stage_index()),
        tokenizer_(target->tokenizer()),
        n_embd_(static_cast<std::size_t>(target->config().n_embd)),
        in_nodes_(ng_),
        out_nodes_(ng_) {}

  PipelineResult Run(std::span<const int32_t> prompt) {
    unit_.StartDecodeClock();
    FindMyGroup();
    if (k_ < 0) drafter_.emplace(unit_.draft(), o_.children);
    if (k_ >= 0) unit_.stage().StartTree();
    result_.groups = groups_;
    result_.tokens.push_back(unit_.first_token());
    if (PipelineStops(result_, o_, tokenizer_)) return std::move(result_);
    tree_.Reset(unit_.first_token(), static_cast<int32_t>(prompt.size()));
    in_nodes_[0] = {tree_.root()};
    for (bool done = false; !done;) {
      PipelineTimestep step;
      step.stage_rows.assign(ng_, 0);
      for (std::size_t g = 0; g < ng_; ++g) {
        step.stage_rows[g] = static_cast<int32_t>(in_nodes_[g].size());
      }
      const std::span<const float> root_logits = Compute(step);
      for (std::size_t g = 0; g + 1 < ng_; ++g) out_nodes_[g] = in_nodes_[g];
      bool miss = false;
      if (!in_nodes_[ng_ - 1].empty()) done = Synchronize(root_logits, step, &miss);
      ++result_.timesteps;
      result_.log.push_back(std::move(step));
      if (!done) Transmit(miss);
    }
    unit_.StopDecodeClock(result_);
    return std::move(result_);
  }

 private:
  // This stage's group, and whether it is the group's last stage (which sends on after the sync).
  void FindMyGroup() {
    for (int32_t g = 0, first = 0; g < static_cast<int32_t>(ng_) && k_ >= 0;
         first += groups_[g++]) {
      if (k_ < first + groups_[g]) {
        my_group_ = g;
        group_end_ = k_ + 1 == first + groups_[g];
        return;
      }
    }
  }

  // The draft and every stage with input, each on its own layer; within a group the stages run
  // one after another. The root's logits when this is the last stage.
  std::span<const float> Compute(PipelineTimestep& step) {
    if (!in_nodes_[0].empty()) step.draft_rows = static_cast<int32_t>(in_nodes_[0].size());
    if (drafter_ && !in_nodes_[0].empty()) {
      const Timer timer;
      drafter_->RunLayer(tree_, in_nodes_[0]);
      unit_.AddForwardSeconds(timer.Seconds());
    }
    my_out_.clear();
    if (k_ < 0 || in_nodes_[static_cast<std::size_t>(my_group_)].empty()) return {};
    const std::vector<int64_t>& nodes = in_nodes_[static_cast<std::size_t>(my_group_)];
    PipeMessage in;
    if (k_ > 0) in = net_.Receive(StageRank(k_ - 1), kPipeHiddenTag);
    const Timer timer;
    const std::span<const float> out = unit_.stage().RunLayer(tree_, nodes, in.floats);
    unit_.AddForwardSeconds(timer.Seconds());
    if (unit_.last_stage()) {
      GROVE_CHECK(nodes.size() == 1 && nodes[0] == tree_.root(),
                  "pipedec: the last stage got a layer other than the root");
      return out;
    }
    if (!group_end_) {
      net_.Send(StageRank(k_ + 1), kPipeHiddenTag, {{}, {out.begin(), out.end()}});
    } else {
      my_out_.assign(out.begin(), out.end());
    }
    return {};
  }

  // The target's token after the root, from the last stage; every unit commits the root and
  // prunes to the hit child's subtree, or drops its tree on a miss. Whether the run is done.
  bool Synchronize(std::span<const float> root_logits, PipelineTimestep& step, bool* miss) {
    step.synced = true;
    ++result_.syncs;
    const int64_t root = tree_.root();
    std::vector<int32_t> token;
    if (!root_logits.empty()) {
      token.push_back(sampler_.Sample(root_logits, o_.sequence, tree_.node(root).position + 1));
    }
    const int32_t x = unit_.ShareTokens(std::move(token)).at(0);
    result_.tokens.push_back(x);
    const int64_t hit = tree_.ChildOfRoot(x);
    if (hit >= 0) {
      tree_.PruneTo(hit);
      step.hit = true;
      ++result_.hits;
    } else {
      *miss = true;
    }
    if (k_ >= 0) unit_.stage().Sync(root, *miss ? nullptr : &tree_);
    if (drafter_) drafter_->tree().Sync(root, *miss ? nullptr : &tree_);
    if (*miss) tree_.Reset(x, tree_.node(root).position + 1);
    if (drafter_) drafter_->Forget(tree_);
    // In-flight rows follow the tree: those of pruned nodes are dropped.
    for (int32_t g = 0; g + 1 < static_cast<int32_t>(ng_); ++g) {
      const bool mine = g == my_group_ && group_end_;
      KeepLiveRows(tree_, *miss, out_nodes_[static_cast<std::size_t>(g)], mine ? &my_out_ : nullptr,
                   n_embd_);
    }
    return PipelineStops(result_, o_, tokenizer_);
  }

  // Every group's output moves one group on; the draft's next layer enters the first group (and
  // the draft), or after a miss the target's token alone refills the pipeline.
  void Transmit(bool miss) {
    if (k_ >= 0 && group_end_ && !unit_.last_stage() &&
        !out_nodes_[static_cast<std::size_t>(my_group_)].empty()) {
      net_.Send(StageRank(k_ + 1), kPipeHiddenTag, {{}, std::move(my_out_)});
    }
    for (std::size_t g = ng_ - 1; g >= 1; --g) in_nodes_[g] = std::move(out_nodes_[g - 1]);
    in_nodes_[0].clear();
    if (miss) {
      in_nodes_[0] = {tree_.root()};
      return;
    }
    PipeMessage layer;
    if (drafter_) layer = drafter_->CandidatesOf(tree_.layer(tree_.n_layers() - 1));
    layer = Broadcast(net_, kDraftRank, kPipeLayerTag, std::move(layer));
    if (const auto candidates = ReadCandidates(layer)) {
      const std::span<const int64_t> added = tree_.Expand(*candidates, o_.width);
      in_nodes_[0].assign(added.begin(), added.end());
    }
  }

  const PipelineOptions& o_;
  const std::vector<int32_t> groups_;
  const std::size_t ng_;
  Sampler sampler_;
  PipelineRank unit_;
  PipeTransport& net_;
  const int32_t k_;  // -1: the draft
  int32_t my_group_ = -1;
  bool group_end_ = false;
  const Tokenizer* tokenizer_;
  const std::size_t n_embd_;
  std::optional<TreeDraft> drafter_;
  PipelineResult result_;
  PredictionTree tree_;
  // Every rank's bookkeeping of every group: the nodes (of one tree layer) that reach it at the
  // next timestep, and those it computed in this one. This rank's own hidden rows beside them.
  std::vector<std::vector<int64_t>> in_nodes_, out_nodes_;
  std::vector<float> my_out_;
};

PipelineResult PipeDecRank(PipeTransport& transport,
                           const std::shared_ptr<const ModelParameters>& target,
                           const std::shared_ptr<const ModelParameters>& draft,
                           std::span<const int32_t> prompt, const PipelineOptions& o) {
  std::vector<int32_t> groups = CheckPipeDecRun(*target, *draft, o);
  int32_t n_ctx = 0;
  CheckPipelineRun(*target, prompt, o,
                   PipeDecTreeTokens(static_cast<int32_t>(groups.size()), o.width), &n_ctx);
  return PipeDecRun(transport, target, draft, prompt, o, std::move(groups), n_ctx).Run(prompt);
}

PipelineResult PlainPipelineRank(PipeTransport& transport,
                                 const std::shared_ptr<const ModelParameters>& target,
                                 std::span<const int32_t> prompt, const PipelineOptions& o) {
  int32_t n_ctx = 0;
  CheckPipelineRun(*target, prompt, o, 0, &n_ctx);
  Sampler sampler(o.sampling);
  PipelineRank unit(transport, target, nullptr, prompt, o, n_ctx, sampler);
  unit.StartDecodeClock();
  const Tokenizer* tokenizer = target->tokenizer();
  PipelineResult result;
  result.groups.assign(o.stages.size(), 1);
  result.tokens.push_back(unit.first_token());
  Batch batch;
  for (auto position = static_cast<int32_t>(prompt.size()); !PipelineStops(result, o, tokenizer);
       ++position) {
    batch.Clear();
    batch.Add(result.tokens.back(), position, 0, -1, true);
    const std::span<const float> out = unit.Pass(batch, result);
    std::vector<int32_t> token;
    if (!out.empty()) token.push_back(sampler.Sample(out, o.sequence, position + 1));
    result.tokens.push_back(unit.ShareTokens(std::move(token)).at(0));
  }
  unit.StopDecodeClock(result);
  return result;
}

}  // namespace

constexpr Named<PipelineRunKind> kPipelineRunNames[] = {
    {PipelineRunKind::kPlain, "PP"},
    {PipelineRunKind::kStaticTree, "STPP"},
    {PipelineRunKind::kPipeDec, "PipeDec"},
};

const char* PipelineRunName(PipelineRunKind kind) {
  return NameOf(kPipelineRunNames, kind).data();  // the names are literals: NUL-terminated
}

int32_t PipeDecTreeTokens(int32_t n_groups, int32_t width) {
  // The first group holds the most: the root and a layer of at most w per group after the first.
  return 1 + (n_groups - 1) * width;
}

int32_t PipeDecMaxWidth(const ModelParameters& target, int32_t prompt_tokens, int32_t n_predict,
                        int32_t n_groups) {
  // A PipeDec tree grows one level per pipeline step and is verified a level per group: with one
  // group there is no pipeline to keep full, and no tree width would make the run meaningful.
  if (n_groups < 2) {
    Fail(
        "PipeDec needs a pipeline of at least 2 steps (stages, or groups of --group-size "
        "stages), not ",
        n_groups, ": use more stages or a smaller --group-size");
  }
  const int64_t room = static_cast<int64_t>(PipelineContextLimit(target)) - prompt_tokens -
                       n_predict - kPipelineSpareTokens - 1;
  return static_cast<int32_t>(std::max<int64_t>(0, room / (n_groups - 1)));
}

PipelineResult RunPipelineRank(PipelineRunKind kind, PipeTransport& transport,
                               const std::shared_ptr<const ModelParameters>& target,
                               const std::shared_ptr<const ModelParameters>& draft,
                               std::span<const int32_t> prompt, const PipelineOptions& o) {
  switch (kind) {
    case PipelineRunKind::kPlain:
      return PlainPipelineRank(transport, target, prompt, o);
    case PipelineRunKind::kStaticTree:
      CheckDraft(*target, *draft);
      return StaticTreePipelineRank(transport, target, draft, prompt, o);
    case PipelineRunKind::kPipeDec:
      return PipeDecRank(transport, target, draft, prompt, o);
  }
  Fail("pipeline: unknown run");
}

PipelineResult RunPipelineInProcess(PipelineRunKind kind,
                                    const std::shared_ptr<const ModelParameters>& target,
                                    const std::shared_ptr<const ModelParameters>& draft,
                                    std::span<const int32_t> prompt, const PipelineOptions& o) {
  // The ranks' own checks would throw the same error on every thread; the first is kept.
  const std::vector<PipelineResult> results = RunRanksInProcess<PipelineResult>(
      PipelineRankCount(o), std::chrono::milliseconds(o.timeout_ms), [&](PipeTransport& transport) {
        return RunPipelineRank(kind, transport, target, draft, prompt, o);
      });
  return results[kDraftRank];
}

PipelineResult RunPipeDec(std::shared_ptr<const ModelParameters> target,
                          std::shared_ptr<const ModelParameters> draft,
                          std::span<const int32_t> prompt, const PipelineOptions& o) {
  return RunPipelineInProcess(PipelineRunKind::kPipeDec, target, draft, prompt, o);
}

PipelineResult RunPlainPipeline(std::shared_ptr<const ModelParameters> target,
                                std::span<const int32_t> prompt, const PipelineOptions& o) {
  return RunPipelineInProcess(PipelineRunKind::kPlain, target, nullptr, prompt, o);
}

PipelineResult RunStaticTreePipeline(std::shared_ptr<const ModelParameters> target,
                                     std::shared_ptr<const ModelParameters> draft,
                                     std::span<const int32_t> prompt, const PipelineOptions& o) {
  return RunPipelineInProcess(PipelineRunKind::kStaticTree, target, draft, prompt, o);
}

}  // namespace grove
