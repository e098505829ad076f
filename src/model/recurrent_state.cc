#include "model/recurrent_state.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/error.h"
#include "base/timer.h"
#include "model/batch.h"
#include "model/kv_cache_pool.h"
#include "model/weights.h"
#include "ops/gated_delta_net.h"

namespace grove {

RecurrentStates::RecurrentStates(const ModelConfig& config, const ModelWeights& weights,
                                 int32_t first_layer, int32_t last_layer)
    : config_(config),
      weights_(weights),
      shape_(config.gdn),
      layer_index_(static_cast<std::size_t>(config.n_layer), -1) {
  for (int32_t l = first_layer; l < last_layer; ++l) {
    if (!config.is_recurrent(l)) continue;
    layer_index_[static_cast<std::size_t>(l)] = static_cast<int32_t>(held_.size());
    held_.push_back(l);
  }
  state_size_ = static_cast<std::size_t>(shape_.conv_state_size() + shape_.delta_state_size());
  entry_ =
      static_cast<std::size_t>(shape_.conv_dim()) + 2 * static_cast<std::size_t>(shape_.n_v_heads);
  scratch_.resize(static_cast<std::size_t>(shape_.conv_dim()) +
                  2 * static_cast<std::size_t>(shape_.value_dim()));
}

RecurrentStates::Sequence& RecurrentStates::At(int32_t seq) {
  if (seq < 0) Fail("model: sequence ", seq, " is out of range");
  if (static_cast<std::size_t>(seq) >= sequences_.size())
    sequences_.resize(static_cast<std::size_t>(seq) + 1);
  Sequence& s = sequences_[static_cast<std::size_t>(seq)];
  if (s.live.empty() && !held_.empty()) {
    s.live.assign(state_size_ * held_.size(), 0.0f);
    s.main.assign(state_size_ * held_.size(), 0.0f);
    s.saved.assign(state_size_ * held_.size(), 0.0f);
    s.ring.assign(static_cast<std::size_t>(log_tokens_) * held_.size() * entry_, 0.0f);
  }
  return s;
}

void RecurrentStates::Reset(Sequence& s) {
  std::fill(s.live.begin(), s.live.end(), 0.0f);
  std::fill(s.saved.begin(), s.saved.end(), 0.0f);
  s.base = s.checkpoint = 0;
  s.main_end = -1;
  s.nodes.clear();
}

int32_t RecurrentStates::FindNode(const Sequence& s, const KvCachePool& caches, int32_t seq,
                                  int32_t slot, int32_t i) {
  const KvCache& cache = caches.cache(seq);
  path_.clear();
  int32_t t = slot;
  for (; t >= 0 && cache.position(t) >= s.base; t = cache.parent(t)) path_.push_back(t);
  if ((t < 0 ? 0 : cache.position(t) + 1) != s.base) {
    Fail("model: token ", i, " of the batch continues cache slot ", slot, " of sequence ", seq,
         ", whose ancestry skips a position its Gated DeltaNet state absorbed");
  }
  int32_t node = -1;
  const auto n = static_cast<int32_t>(s.nodes.size());
  for (auto k = path_.size(); k-- > 0;) {
    const int32_t position = cache.position(path_[k]);
    const int32_t token = cache.token(path_[k]);
    auto holds = [&](int32_t c) {
      const Node& x = s.nodes[static_cast<std::size_t>(c)];
      return x.parent == node && x.position == position && x.token == token;
    };
    // A chain's nodes follow one another, so the next node is tried first.
    int32_t found = node + 1 < n && holds(node + 1) ? node + 1 : -1;
    for (int32_t c = 0; found < 0 && c < n; ++c) {
      if (holds(c)) found = c;
    }
    if (found < 0) {
      Fail("model: token ", i, " of the batch continues cache slot ", slot, " of sequence ", seq,
           ", whose ancestor at position ", position, " holds token ", token,
           ", which its Gated DeltaNet state never ran");
    }
    node = found;
  }
  return node;
}

void RecurrentStates::Prepare(const Batch& batch, const KvCachePool& caches) {
  if (held_.empty()) return;
  for (const int32_t seq : order_) plans_[static_cast<std::size_t>(seq)] = Plan{};
  order_.clear();
  steps_.clear();
  const auto n = static_cast<std::size_t>(batch.size());
  if (anchor_.size() < n) {
    for (auto* v : {&anchor_, &node_of_, &first_child_, &next_sibling_, &last_child_}) v->resize(n);
  }
  // Each sequence's tokens: one chain or a tree, each at the position after the one it
  // continues; a root's anchor is the cache slot it continues (-1: an empty cache).
  for (int32_t i = 0; i < batch.size(); ++i) {
    const int32_t seq = batch.seq_ids[i];
    if (seq < 0) Fail("model: sequence ", seq, " is out of range");
    if (static_cast<std::size_t>(seq) >= plans_.size())
      plans_.resize(static_cast<std::size_t>(seq) + 1);
    Plan& plan = plans_[static_cast<std::size_t>(seq)];
    if (plan.count++ == 0) order_.push_back(seq);
    first_child_[i] = next_sibling_[i] = last_child_[i] = -1;
    const int32_t parent = batch.parents[i];
    if (parent >= 0) {
      if (batch.positions[i] != batch.positions[parent] + 1) {
        Fail("model: token ", i, " of the batch is at position ", batch.positions[i],
             ", not the one after its parent's: a Gated DeltaNet state absorbs its sequence's "
             "tokens in order");
      }
      if (first_child_[parent] >= 0) plan.chain = false;
      (first_child_[parent] < 0 ? first_child_[parent] : next_sibling_[last_child_[parent]]) = i;
      last_child_[parent] = i;
      anchor_[i] = -2;
      continue;
    }
    if (plan.count > 1) plan.chain = false;
    const KvCache& cache = caches.cache(seq);
    const int32_t cp = batch.cache_parents[i];
    const int32_t slot = cp == Batch::kContinueCache ? cache.length() - 1 : cp;
    const int32_t want = slot < 0 ? 0 : cache.position(slot) + 1;
    if (batch.positions[i] != want) {
      Fail("model: token ", i, " of the batch is at position ", batch.positions[i],
           " but continues cache slot ", slot, " of sequence ", seq, " at position ", want - 1,
           ": a Gated DeltaNet state absorbs its sequence's tokens "
           "in order");
    }
    anchor_[i] = slot;
  }
  // What each sequence's state does before the batch runs, every check before any change.
  for (const int32_t seq : order_) {
    Plan& plan = plans_[static_cast<std::size_t>(seq)];
    Sequence& s = At(seq);
    const KvCache& cache = caches.cache(seq);
    int32_t first_slot = -3;
    bool one_anchor = true;
    for (int32_t i = 0; i < batch.size(); ++i) {
      if (batch.seq_ids[i] != seq || anchor_[i] == -2) continue;
      if (first_slot == -3) first_slot = anchor_[i];
      one_anchor = one_anchor && anchor_[i] == first_slot;
    }
    const int32_t first_position = first_slot < 0 ? -1 : cache.position(first_slot);
    if (first_slot < 0) {
      plan.kind = Plan::kStart;
    } else if (first_position + 1 < s.base) {
      // Behind the committed text (a truncation): back to the checkpoint, and forward from there.
      if (!one_anchor) {
        Fail("model: sequence ", seq, " continues position ", first_position,
             " behind its committed Gated DeltaNet state beside tokens that continue elsewhere");
      }
      if (first_position + 1 < s.checkpoint) {
        Fail("model: sequence ", seq, " continues at position ", first_position + 1,
             ", but its Gated DeltaNet state can continue only from ", s.checkpoint, " to ", s.base,
             " (recurrent state keeps no snapshot of that position)");
      }
      plan.kind = Plan::kRewind;
      plan.rewind_to = first_position + 1;
    }
    if (plan.kind == Plan::kKeep) {
      // Each root continues a pending node (or the base) that its slot's ancestry names.
      int32_t last_slot = -3;
      int32_t last_node = -1;
      for (int32_t i = 0; i < batch.size(); ++i) {
        if (batch.seq_ids[i] != seq || anchor_[i] == -2) continue;
        if (anchor_[i] != last_slot) {
          last_slot = anchor_[i];
          last_node = FindNode(s, caches, seq, last_slot, i);
          // A node other than main's end is replayed from the base or from main: through inputs
          // that were kept.
          for (int32_t x = last_node; x >= 0 && x != s.main_end;
               x = s.nodes[static_cast<std::size_t>(x)].parent) {
            if (!s.nodes[static_cast<std::size_t>(x)].logged) {
              Fail("model: token ", i, " of the batch continues sequence ", seq, " at position ",
                   batch.positions[i],
                   ", inside a prompt whose Gated DeltaNet inputs are not kept (recurrent state "
                   "keeps no snapshot of that position)");
            }
          }
        }
        anchor_[i] = last_node;
      }
      // Continuing the end of a cache that holds a chain only commits that chain.
      if (one_anchor && first_slot == cache.length() - 1 &&
          cache.length() == cache.chain_length()) {
        plan.kind = Plan::kCommit;
        plan.commit = last_node;
      }
    }
    const auto kept = plan.kind == Plan::kKeep ? s.nodes.size() : 0;
    if (kept + static_cast<std::size_t>(plan.count) > kMaxPendingTokens) {
      Fail("model: sequence ", seq, " would hold ", kept + plan.count,
           " speculative tokens beyond its committed text, more than its Gated DeltaNet state "
           "follows (",
           kMaxPendingTokens, ")");
    }
  }
  for (const int32_t seq : order_) {
    const Plan& plan = plans_[static_cast<std::size_t>(seq)];
    Sequence& s = At(seq);
    const Timer timer;
    if (plan.kind == Plan::kStart) {
      Reset(s);
    } else if (plan.kind == Plan::kRewind) {
      s.live = s.saved;
      ReplayRing(s, s.live, s.checkpoint, plan.rewind_to);
      s.base = plan.rewind_to;
      s.nodes.clear();
      s.main_end = -1;
    } else if (plan.kind == Plan::kCommit) {
      Commit(s, plan.commit);
    }
    if (plan.kind != Plan::kKeep) {
      for (int32_t i = 0; i < batch.size(); ++i) {
        if (batch.seq_ids[i] == seq && anchor_[i] != -2) anchor_[i] = -1;
      }
    }
    PlanWalk(batch, seq, s, plan);
    s.seconds += timer.Seconds();
  }
}

void RecurrentStates::Commit(Sequence& s, int32_t node) {
  if (node < 0) {
    s.nodes.clear();
    s.main_end = -1;
    return;
  }
  path_.clear();
  for (int32_t x = node; x >= 0; x = s.nodes[static_cast<std::size_t>(x)].parent)
    path_.push_back(x);
  std::reverse(path_.begin(), path_.end());
  const auto k = static_cast<int32_t>(path_.size());
  const int32_t end = s.base + k;
  bool logged = k <= log_tokens_;
  for (const int32_t x : path_) logged = logged && s.nodes[static_cast<std::size_t>(x)].logged;
  if (logged) {
    MakeRoom(s, end);
    for (const int32_t x : path_) {
      const int32_t position = s.nodes[static_cast<std::size_t>(x)].position;
      for (std::size_t index = 0; index < held_.size(); ++index) {
        std::memcpy(RingEntry(s, position, index), Entry(s, x, static_cast<int32_t>(index)),
                    entry_ * sizeof(float));
      }
    }
  }
  // From main where it holds the path's end or an ancestor of it (no work), else from the base.
  const auto at_main = std::find(path_.begin(), path_.end(), s.main_end);
  auto rest = path_.begin();
  if (s.main_end >= 0 && at_main != path_.end()) {
    std::swap(s.live, s.main);
    rest = at_main + 1;
  }
  for (; rest != path_.end(); ++rest) {
    for (std::size_t index = 0; index < held_.size(); ++index) {
      float* state = s.live.data() + index * state_size_;
      ReplayToken(Entry(s, *rest, static_cast<int32_t>(index)), index, state, state);
    }
  }
  s.base = end;
  s.nodes.clear();
  s.main_end = -1;
  if (!logged) {
    // A prompt: its inputs were not kept, so the checkpoint moves to its end.
    s.saved = s.live;
    s.checkpoint = s.base;
  }
}

void RecurrentStates::MakeRoom(Sequence& s, int32_t end) {
  if (end - s.checkpoint <= log_tokens_) return;
  // The checkpoint moves on to where the new tokens fit, at least kRecurrentHistory behind end.
  const int32_t to = std::max(end - log_tokens_, std::min(end - kRecurrentHistory, s.base));
  ReplayRing(s, s.saved, s.checkpoint, to);
  s.checkpoint = to;
}

void RecurrentStates::PlanWalk(const Batch& batch, int32_t seq, Sequence& s, const Plan& plan) {
  // The batch's tokens become pending nodes, in batch order (parents first).
  const bool logged = !(plan.chain && plan.count > log_tokens_);
  for (int32_t i = 0; i < batch.size(); ++i) {
    if (batch.seq_ids[i] != seq) continue;
    const int32_t parent = batch.parents[i];
    node_of_[i] = static_cast<int32_t>(s.nodes.size());
    s.nodes.push_back({.position = batch.positions[i],
                       .token = batch.tokens[i],
                       .parent = parent >= 0 ? node_of_[parent] : anchor_[i],
                       .logged = logged});
  }
  if (logged && s.entries.size() < s.nodes.size() * held_.size() * entry_)
    s.entries.resize(s.nodes.size() * held_.size() * entry_);
  // Roots continuing the same node are siblings under it: one group each, headed by its first.
  // Main is written by the group continuing main's end, else by one continuing the base.
  int32_t writer = -1;
  int32_t base_head = -1;
  for (int32_t i = 0; i < batch.size(); ++i) {
    if (batch.seq_ids[i] != seq || batch.parents[i] >= 0) continue;
    const int32_t head = GroupHead(batch, seq, i);
    if (head != i) {
      int32_t last = head;
      while (next_sibling_[last] >= 0) last = next_sibling_[last];
      next_sibling_[last] = i;
    } else if (s.main_end >= 0 && anchor_[i] == s.main_end) {
      writer = i;
    } else if (anchor_[i] == -1 && base_head < 0) {
      base_head = i;
    }
  }
  if (writer < 0) writer = base_head;
  // Groups that leave main alone first (one may replay from it), then the one that writes it.
  for (int32_t i = 0; i < batch.size(); ++i) {
    if (batch.seq_ids[i] != seq || batch.parents[i] >= 0 || i == writer) continue;
    if (GroupHead(batch, seq, i) != i) continue;
    const int32_t b = AcquireScratch();
    int32_t from = kLive;
    if (anchor_[i] >= 0) {
      // Replayed into b: from main when main's end is an ancestor, else from the base.
      path_.clear();
      for (int32_t x = anchor_[i]; x >= 0 && x != s.main_end;
           x = s.nodes[static_cast<std::size_t>(x)].parent)
        path_.push_back(x);
      const bool from_main =
          s.main_end >= 0 &&
          (path_.empty() ? anchor_[i] == s.main_end
                         : s.nodes[static_cast<std::size_t>(path_.back())].parent == s.main_end);
      from = from_main ? kMain : kLive;
      for (auto k = path_.size(); k-- > 0;) {
        steps_.push_back({.seq = seq, .token = -1, .node = path_[k], .from = from, .to = b});
        from = b;
      }
    }
    PlanSubtrees(seq, i, from, b);
    free_scratch_.push_back(b);
  }
  if (writer >= 0) {
    const int32_t end = PlanSubtrees(seq, writer, anchor_[writer] == -1 ? kLive : kMain, kMain);
    s.main_end = end;
  }
}

int32_t RecurrentStates::GroupHead(const Batch& batch, int32_t seq, int32_t root) const {
  for (int32_t j = 0; j < root; ++j) {
    if (batch.seq_ids[j] == seq && batch.parents[j] < 0 && anchor_[j] == anchor_[root]) return j;
  }
  return root;
}

int32_t RecurrentStates::PlanSubtrees(int32_t seq, int32_t first, int32_t from, int32_t to) {
  int32_t last = -1;
  for (int32_t list = first; list >= 0; list = first_child_[list]) {
    // The siblings first, each in a buffer of its own, while `from` still holds their parent.
    for (int32_t c = next_sibling_[list]; c >= 0; c = next_sibling_[c]) {
      const int32_t b = AcquireScratch();
      steps_.push_back({.seq = seq, .token = c, .node = node_of_[c], .from = from, .to = b});
      PlanSubtrees(seq, first_child_[c], b, b);
      free_scratch_.push_back(b);
    }
    steps_.push_back({.seq = seq, .token = list, .node = node_of_[list], .from = from, .to = to});
    last = node_of_[list];
    from = to;
  }
  return last;
}

int32_t RecurrentStates::AcquireScratch() {
  if (!free_scratch_.empty()) {
    const int32_t b = free_scratch_.back();
    free_scratch_.pop_back();
    return b;
  }
  scratch_states_.emplace_back(state_size_, 0.0f);
  return static_cast<int32_t>(scratch_states_.size()) - 1;
}

float* RecurrentStates::StateOf(Sequence& s, int32_t buffer, int32_t layer) {
  if (buffer == kLive) return s.live.data() + StateOffset(layer);
  if (buffer == kMain) return s.main.data() + StateOffset(layer);
  return scratch_states_[static_cast<std::size_t>(buffer)].data();
}

float* RecurrentStates::Entry(Sequence& s, int32_t node, int32_t index) {
  return s.entries.data() +
         (static_cast<std::size_t>(node) * held_.size() + static_cast<std::size_t>(index)) * entry_;
}

float* RecurrentStates::RingEntry(Sequence& s, int32_t position, std::size_t index) {
  const auto slot = static_cast<std::size_t>(position % log_tokens_);
  return s.ring.data() + (slot * held_.size() + index) * entry_;
}

void RecurrentStates::RunLayer(int32_t layer, float* qkv, const float* z, const float* beta,
                               const float* alpha, float* out) {
  const int32_t index = layer_index_[static_cast<std::size_t>(layer)];
  GROVE_CHECK(index >= 0, "recurrent state: layer is not a held recurrent layer");
  const GatedDeltaNetWeights& w = weights_.layers[static_cast<std::size_t>(layer)].gdn;
  const GatedDeltaNetDims dims{.conv_kernel = shape_.conv_kernel,
                               .d_state = shape_.d_state,
                               .n_k_heads = shape_.n_k_heads,
                               .n_v_heads = shape_.n_v_heads,
                               .eps = config_.rms_eps};
  const GatedDeltaNetParams params{
      .conv = w.conv.data(), .dt_bias = w.dt_bias.data(), .a = w.a.data(), .norm = w.norm.data()};
  const std::size_t conv_dim = shape_.conv_dim();
  const std::size_t value_dim = shape_.value_dim();
  const std::size_t heads = shape_.n_v_heads;
  const auto conv_state = static_cast<std::size_t>(shape_.conv_state_size());
  for (const Step& step : steps_) {
    Sequence& s = sequences_[static_cast<std::size_t>(step.seq)];
    const float* from = StateOf(s, step.from, layer);
    float* to = StateOf(s, step.to, layer);
    if (step.token < 0) {
      const Timer timer;
      ReplayToken(Entry(s, step.node, index), static_cast<std::size_t>(index), from, to);
      s.seconds += timer.Seconds();
      continue;
    }
    const auto row = static_cast<std::size_t>(step.token);
    float* q = qkv + row * conv_dim;
    const float* b = beta + row * heads;
    const float* a = alpha + row * heads;
    if (s.nodes[static_cast<std::size_t>(step.node)].logged) {
      float* e = Entry(s, step.node, index);
      std::memcpy(e, q, conv_dim * sizeof(float));
      std::memcpy(e + conv_dim, b, heads * sizeof(float));
      std::memcpy(e + conv_dim + heads, a, heads * sizeof(float));
    }
    GatedDeltaNetToken(dims, params, {.conv = from, .delta = from + conv_state},
                       {.conv = to, .delta = to + conv_state}, q, z + row * value_dim, b, a,
                       out + row * value_dim);
  }
}

void RecurrentStates::ReplayToken(const float* entry, std::size_t index, const float* from,
                                  float* to) {
  const std::size_t conv_dim = shape_.conv_dim();
  const std::size_t heads = shape_.n_v_heads;
  const GatedDeltaNetWeights& w = weights_.layers[static_cast<std::size_t>(held_[index])].gdn;
  const GatedDeltaNetDims dims{.conv_kernel = shape_.conv_kernel,
                               .d_state = shape_.d_state,
                               .n_k_heads = shape_.n_k_heads,
                               .n_v_heads = shape_.n_v_heads,
                               .eps = config_.rms_eps};
  float* qkv = scratch_.data();
  float* z = qkv + conv_dim;  // zeros: the output is not wanted, only the state
  float* out = z + shape_.value_dim();
  std::fill(z, z + shape_.value_dim(), 0.0f);
  std::memcpy(qkv, entry, conv_dim * sizeof(float));
  const auto conv_state = static_cast<std::size_t>(shape_.conv_state_size());
  GatedDeltaNetToken(
      dims,
      {.conv = w.conv.data(), .dt_bias = w.dt_bias.data(), .a = w.a.data(), .norm = w.norm.data()},
      {.conv = from, .delta = from + conv_state}, {.conv = to, .delta = to + conv_state}, qkv, z,
      entry + conv_dim, entry + conv_dim + heads, out);
}

void RecurrentStates::ReplayRing(Sequence& s, std::vector<float>& state, int32_t from, int32_t to) {
  for (int32_t t = from; t < to; ++t) {
    for (std::size_t index = 0; index < held_.size(); ++index) {
      float* values = state.data() + index * state_size_;
      ReplayToken(RingEntry(s, t, index), index, values, values);
    }
  }
}

std::size_t RecurrentStates::StateOffset(int32_t layer) const {
  const int32_t index = layer_index_[static_cast<std::size_t>(layer)];
  GROVE_CHECK(index >= 0, "recurrent state: layer is not a held recurrent layer");
  return static_cast<std::size_t>(index) * state_size_;
}

int32_t RecurrentStates::checkpoint(int32_t seq) const {
  return seq >= 0 && static_cast<std::size_t>(seq) < sequences_.size()
             ? sequences_[static_cast<std::size_t>(seq)].checkpoint
             : 0;
}

double RecurrentStates::state_seconds(int32_t seq) const {
  return seq >= 0 && static_cast<std::size_t>(seq) < sequences_.size()
             ? sequences_[static_cast<std::size_t>(seq)].seconds
             : 0.0;
}

void RecurrentStates::Copy(int32_t parent, int32_t child) {
  if (held_.empty()) return;
  At(std::max(parent, child));  // sized for both, so neither reference moves
  Sequence copy = At(parent);
  At(child) = std::move(copy);
}

uint64_t RecurrentStates::bytes() const {
  uint64_t n = 0;
  for (const Sequence& s : sequences_) {
    n += (s.live.size() + s.main.size() + s.saved.size() + s.ring.size() + s.entries.size()) *
         sizeof(float);
  }
  for (const auto& b : scratch_states_) n += b.size() * sizeof(float);
  return n;
}

}  // namespace grove
