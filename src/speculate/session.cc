#include "speculate/session.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "base/timer.h"
#include "model/prefix_reuse.h"
#include "model/recurrent_state.h"
#include "speculate/node_attribution.h"
#include "speculate/plain_decoding.h"
#include "speculate/target_feature_reader.h"
#include "tokenize/tokenizer.h"

namespace grove {

SpeculativeSession::SpeculativeSession(Model& target, Drafter& drafter,
                                       const SpeculationPolicy& policy,
                                       const SessionOptions& options)
    : target_(target),
      drafter_(drafter),
      feature_reader_(drafter.feature_reader()),
      policy_(policy),
      options_(options),
      planner_(policy_, options.verify_cost, drafter, target.max_batch()),
      builder_(policy.draw, policy.sampling),
      draft_(builder_.NewState(target.config().n_vocab)),
      target_sampler_(policy.sampling),
      rng_(policy.sampling.seed),
      target_row_(static_cast<std::size_t>(target.config().n_vocab)) {
  if (drafter.n_vocab() != target.config().n_vocab) {
    Fail("drafter '", drafter.name(), "' has ", drafter.n_vocab(), " tokens, the target ",
         target.config().n_vocab);
  }
  if (options.target_seq < 0 || options.target_seq >= target.n_seq()) {
    Fail("session: target sequence ", options.target_seq, " outside 0..", target.n_seq() - 1);
  }
  if (options.n_predict < 0) Fail("session: n_predict ", options.n_predict, " is negative");
  const int32_t max_rows = planner_.max_nodes() + 1;
  if (max_rows > target.max_batch()) {
    Fail("tree spec '", policy.plan.text, "' verifies up to ", max_rows,
         " tokens, more than the target's batch of ", target.max_batch());
  }
  drafter_.SampleChildren(policy.draw != ChildDraw::kDeterministic);
  drafter_.ReuseCache(options.reuse_cache);
  draft_.Reserve(policy.plan, policy.draw);
  drafter_.Reserve(policy.plan.max_nodes(), policy.plan.max_drafted_nodes());
  if (planner_.drafts_chains()) {
    draft_.Reserve(ParseTreePlan(StrCat("chain:", kMaxCheapChainDepth), {}), policy.draw);
    drafter_.Reserve(kMaxCheapChainDepth, kMaxCheapChainDepth);
  }
  batch_.tokens.reserve(target.max_batch());
  kept_slots_.reserve(static_cast<std::size_t>(max_rows));
  emitted_.reserve(static_cast<std::size_t>(max_rows) + 1);
  result_.accepted.reserve(static_cast<std::size_t>(max_rows));
  drafted_accepted_.reserve(static_cast<std::size_t>(max_rows));
  if (feature_reader_)
    features_.reserve(static_cast<std::size_t>(max_rows) * target.config().n_embd);
}

SpeculativeSession::~SpeculativeSession() = default;

bool SpeculativeSession::IsStop(int32_t token) const {
  return options_.stop_at_eog && target_.tokenizer() &&
         target_.tokenizer()->IsEndOfGeneration(token);
}

int32_t KeepCachedPrompt(Model& target, const SessionOptions& options,
                         std::span<const int32_t> prompt) {
  if (prompt.empty()) Fail("generation needs at least one prompt token");
  // Plain decoding's rule: the prompt must leave room for at least one generated token.
  if (static_cast<int64_t>(prompt.size()) >= target.n_ctx()) {
    Fail("the prompt is ", prompt.size(), " tokens but the context holds ", target.n_ctx());
  }
  KvCache& cache = target.cache(options.target_seq);
  const int32_t cached = options.cached_prompt;
  if (cached < 0 || cached >= static_cast<int32_t>(prompt.size()) ||
      cached > cache.chain_length()) {
    Fail("the target cache holds ", cache.chain_length(), " committed tokens, not the ", cached,
         " cached prompt tokens of a ", prompt.size(), "-token prompt");
  }
  // A window layer's ring may no longer hold the rows the cached prompt's end needs (the cache
  // went on far past it): then the prompt is computed again.
  int32_t kept = cache.ReusablePrefix(cached);
  if (options.reuse_cache && PrefixReusable(target.config())) {
    // The last prompt token is always fed: its row gives the first logits (plain decoding) or it
    // is the first tree's root (a session).
    kept = std::max(kept, cache.MatchingPrefix(prompt.first(prompt.size() - 1)));
  }
  cache.Truncate(kept);
  return kept;
}

void SpeculativeSession::Start(std::span<const int32_t> prompt) {
  int32_t cached = KeepCachedPrompt(target_, options_, prompt);
  stats_ = SpeculationStats{};
  stats_.prompt_tokens = static_cast<int64_t>(prompt.size());
  for (auto* v : {&stats_.accepted_at_depth, &stats_.reached_depth, &stats_.first_rank}) {
    v->reserve(static_cast<std::size_t>(planner_.max_nodes()) + 1);  // depths and ranks
  }
  Timer prefill;
  drafter_.Begin(prompt);
  if (options_.reuse_cache && feature_reader_ && cached > feature_reader_->ObservedPrefix()) {
    // The drafter needs the target's features of every prompt position: the target prefill runs
    // again from where the drafter's kept features end.
    KvCache& cache = target_.cache(options_.target_seq);
    cached = cache.ReusablePrefix(feature_reader_->ObservedPrefix());
    cache.Truncate(cached);
  }
  stats_.cached_prompt_tokens = cached;
  Prefill(prompt, cached);
  state_seconds_ = TargetStateSeconds();
  root_ = prompt.back();
  root_position_ = static_cast<int32_t>(prompt.size()) - 1;
  planner_.Begin(target_, root_position_);
  stats_.prefill_seconds = prefill.Seconds();
  done_ = options_.n_predict == 0;
  generation_timer_.Reset();
}

void SpeculativeSession::Prefill(std::span<const int32_t> prompt, int32_t cached) {
  const std::span<const int32_t> uncached =
      prompt.subspan(static_cast<std::size_t>(cached), prompt.size() - 1 - cached);
  if (!feature_reader_) {
    target_.ForwardChain(uncached, cached, options_.target_seq, batch_, /*want_logits=*/false);
    return;
  }
  // A feature drafter reads the target's hidden state of every prompt position: one chunk of the
  // batch at a time, each handed over before the next forward replaces it.
  for (std::size_t done = 0; done < uncached.size();) {
    const std::size_t n =
        std::min(uncached.size() - done, static_cast<std::size_t>(target_.max_batch()));
    const int32_t first = cached + static_cast<int32_t>(done);
    batch_.Clear();
    batch_.AddChain(uncached.subspan(done, n), first, options_.target_seq);
    batch_.logits.back() = 0;
    target_.Forward(batch_);
    feature_reader_->ObserveTarget(first, target_.hidden_states());
    done += n;
  }
}

void SpeculativeSession::Draft() {
  GROVE_CHECK(!done_, "session: Draft after the end of generation");
  step_timer_.Reset();
  step_ = StepTimes{};
  Timer timer;
  // The planner measures the target when it can afford to (counted as tree building, and apart).
  stats_.measure_seconds +=
      planner_.MeasureIfDue(target_, options_.target_seq, root_, root_position_);
  const bool last_token = options_.n_predict - stats_.generated <= 1;
  const TokenTree* shape = planner_.ChooseShape(last_token);
  const TreePlan& plan = policy_.plan;
  const int32_t max_nodes = shape ? shape->size() : plan.max_nodes();

  // Speculate only while the tree, and the token after its deepest node, fit the context (plain
  // decoding's last token sits at n_ctx - 1) and the drafter has room for it (OPT-Tree checks
  // again before each further layer it drafts); then decode plainly.
  const bool room = static_cast<int64_t>(root_position_) + max_nodes + 2 <= target_.n_ctx() &&
                    drafter_.HasRoomFor(max_nodes);
  if (!room || (shape && shape->empty())) {
    draft_.ClearTree();
  } else if (shape) {
    builder_.BuildShape(*shape, drafter_, rng_, options_.sequence, root_position_, draft_);
  } else {
    builder_.Build(plan, drafter_, rng_, options_.sequence, root_position_, draft_);
  }
  planner_.Drafted(draft_.tree());
  step_.draft_forward = draft_.expand_seconds();
  step_.tree_building = timer.Seconds() - draft_.expand_seconds();
}

void SpeculativeSession::AppendVerify(Batch& batch) {
  first_row_ =
      static_cast<int32_t>(std::count(batch.logits.begin(), batch.logits.end(), uint8_t{1}));
  const int32_t root_index = batch.size();
  root_batch_index_ = root_index;
  batch.Add(root_, root_position_, options_.target_seq, -1, true);
  draft_.tree().AppendToBatch(batch, root_position_ + 1, options_.target_seq, root_index);
}

double SpeculativeSession::TargetStateSeconds() const {
  const RecurrentStates* states = target_.kv().recurrent();
  return states ? states->state_seconds(options_.target_seq) : 0.0;
}

std::span<const int32_t> SpeculativeSession::Accept(std::span<const float> logits) {
  const TokenTree& tree = draft_.tree();
  // The recurrent state's part of the verify forward (commit, rewinds, replays) is its own.
  const double state_now = TargetStateSeconds();
  step_.state = state_now - state_seconds_;
  state_seconds_ = state_now;
  step_.verify_forward = std::max(0.0, step_.verify_forward - step_.state);
  const ExpertsRead experts = target_.experts_read();
  stats_.verify_experts += experts.experts;
  stats_.verify_expert_layers += experts.layers;
  Timer timer;
  VerifyRows(logits);
  step_.verification = timer.Seconds();
  timer.Reset();
  CommitAccepted();
  step_.cache = timer.Seconds();
  CountStep(tree);
  EmitAccepted(tree);
  // "other": whatever the step's span (Draft to here) spent outside the measured parts.
  step_.other = std::max(0.0, step_timer_.Seconds() - step_wait_ - step_.total());
  stats_.times += step_;
  if (LogEnabled(LogLevel::kDebug)) LogStep(tree);
  step_wait_ = 0.0;
  planner_.Observe({.tree = tree,
                    .accepted = result_.accepted,
                    .draft_seconds = step_.draft_forward,
                    .first_draft_seconds = draft_.first_expand_seconds(),
                    .draft_calls = draft_.expand_calls(),
                    .verify_seconds = step_.verify_forward,
                    .step_seconds = step_.total()});
  return emitted_;
}

void SpeculativeSession::LogStep(const TokenTree& tree) const {
  const NodeAttribution* attribution = drafter_.attribution();
  Log(LogLevel::kDebug, "step: ",
      planner_.cheap_step() ? "cheap"
      : planner_.tailed()   ? "tail"
                            : "planned",
      " ", tree.size(), " nodes (", planner_.planned_tree(tree).size(), " planned), ",
      result_.accepted.size(), " accepted; draft ", 1e3 * step_.draft_forward, " ms, verify ",
      1e3 * step_.verify_forward, " ms, wait ", 1e3 * step_wait_, " ms, step ", 1e3 * step_.total(),
      " ms", attribution ? "; " + attribution->Why() : std::string());
}

void SpeculativeSession::VerifyRows(std::span<const float> logits) {
  const TokenTree& tree = draft_.tree();
  const int32_t nv = target_.config().n_vocab;
  const int32_t n_rows = tree.size() + 1;
  GROVE_CHECK(logits.size() >= static_cast<std::size_t>(first_row_ + n_rows) * nv,
              "session: the batch's logits do not cover this session's rows");
  const float* rows = logits.data() + static_cast<std::size_t>(first_row_) * nv;
  // Verification reads the target's distribution only at the rows its walk reaches; greedy reads
  // the logits' argmax, which is the one-hot distribution's.
  const bool greedy = policy_.rule == VerifyRule::kGreedy;
  auto target_row = [&](int32_t r) -> std::span<const float> {
    const std::span<const float> row(rows + static_cast<std::size_t>(r) * nv,
                                     static_cast<std::size_t>(nv));
    if (greedy) return row;
    target_sampler_.Distribution(row, target_row_);
    return target_row_;
  };
  verifier_.Verify(policy_.rule, tree, target_row, nv, draft_.draft_rows(), rng_, options_.sequence,
                   root_position_, result_);
}

void SpeculativeSession::CommitAccepted() {
  // The root stays at its slot, the accepted nodes move down behind it; the drafter keeps the
  // nodes it has fed, named by their ids in the tree it expanded (DraftState::drafted_node).
  kept_slots_.clear();
  for (int32_t node : result_.accepted) kept_slots_.push_back(root_position_ + 1 + node);
  target_.cache(options_.target_seq).Compact(root_position_ + 1, kept_slots_);
  if (feature_reader_) HandOverFeatures();
  drafted_accepted_.clear();
  for (int32_t node : result_.accepted) drafted_accepted_.push_back(draft_.drafted_node(node));
  drafter_.Commit(draft_.drafted_tree(), drafted_accepted_, result_.next_token);
}

void SpeculativeSession::HandOverFeatures() {
  // The target's features of the root and the accepted nodes, before the next forward replaces
  // them (a driver runs no target forward between its batch's forward and Accept).
  const std::span<const float> hidden = target_.hidden_states();
  const auto d = static_cast<std::size_t>(target_.config().n_embd);
  const auto n_rows = static_cast<std::size_t>(draft_.tree().size()) + 1;
  GROVE_CHECK(hidden.size() >= (static_cast<std::size_t>(root_batch_index_) + n_rows) * d,
              "session: the target's last forward is not the batch this session was verified in");
  auto row = [&](int32_t batch_index) {
    return hidden.subspan(static_cast<std::size_t>(batch_index) * d, d);
  };
  features_.clear();
  features_.insert(features_.end(), row(root_batch_index_).begin(), row(root_batch_index_).end());
  for (int32_t node : result_.accepted) {
    const std::span<const float> r = row(root_batch_index_ + 1 + node);
    features_.insert(features_.end(), r.begin(), r.end());
  }
  feature_reader_->ObserveTarget(root_position_, features_);
}

void SpeculativeSession::CountStep(const TokenTree& tree) {
  ++stats_.steps;
  if (tree.empty()) ++stats_.plain_steps;
  RecordTreeStats(tree);
  planner_.CountStep(tree, result_.accepted.size(), stats_);
}

void SpeculativeSession::EmitAccepted(const TokenTree& tree) {
  emitted_.clear();
  for (int32_t node : result_.accepted) emitted_.push_back(tree.node(node).token);
  emitted_.push_back(result_.next_token);
  std::size_t n_emit = 0;
  while (n_emit < emitted_.size() && !done_) {
    const int32_t token = emitted_[n_emit++];
    ++stats_.generated;
    if (IsStop(token) || stats_.generated >= options_.n_predict) done_ = true;
  }
  emitted_.resize(n_emit);
  root_ = result_.next_token;
  root_position_ += static_cast<int32_t>(result_.accepted.size()) + 1;
  if (root_position_ >= target_.n_ctx() - 1) done_ = true;  // the context is full
  if (done_) {
    stats_.total_seconds = generation_timer_.Seconds();
    drafter_.End();
  }
}

void SpeculativeSession::RecordTreeStats(const TokenTree& tree) {
  if (tree.empty()) return;
  stats_.tree_nodes += tree.size();
  stats_.CountDepths(static_cast<std::size_t>(tree.depth()), result_.accepted.size());
  const std::size_t rank = result_.accepted.empty() ? 0 : tree.rank(result_.accepted[0]) + 1;
  if (stats_.first_rank.size() <= rank) stats_.first_rank.resize(rank + 1, 0);
  ++stats_.first_rank[rank];
}

std::vector<int32_t> SpeculativeSession::Generate(std::span<const int32_t> prompt,
                                                  const std::function<bool(int32_t)>& on_token) {
  Start(prompt);
  std::vector<int32_t> out;
  out.reserve(static_cast<std::size_t>(std::min(options_.n_predict, target_.n_ctx())));
  bool stopped = false;
  while (!done_ && !stopped) {
    Draft();
    batch_.Clear();
    AppendVerify(batch_);
    Timer forward;
    const std::span<const float> logits = target_.Forward(batch_);
    RecordVerifyForward(forward.Seconds());
    for (int32_t token : Accept(logits)) {
      out.push_back(token);
      if (on_token && !on_token(token)) {
        stopped = true;
        break;
      }
    }
  }
  stats_.total_seconds = generation_timer_.Seconds();  // also when on_token stopped it
  return out;
}

std::vector<int32_t> GenerateSpeculativeOrPlain(SpeculativeSession* session, Model& target,
                                                std::span<const int32_t> prompt,
                                                const SamplerParams& sampling,
                                                const SessionOptions& options,
                                                const std::function<bool(int32_t)>& on_token,
                                                PlainTiming* plain_timing) {
  if (session) return session->Generate(prompt, on_token);
  return GeneratePlain(target, prompt, sampling, options, on_token, plain_timing);
}

}  // namespace grove
