#include "model/recurrent_state.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "model/batch.h"
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
    s.saved.assign(state_size_ * held_.size(), 0.0f);
    s.log.assign(static_cast<std::size_t>(log_tokens_) * held_.size() * entry_, 0.0f);
  }
  return s;
}

void RecurrentStates::Reset(Sequence& s) {
  std::fill(s.live.begin(), s.live.end(), 0.0f);
  std::fill(s.saved.begin(), s.saved.end(), 0.0f);
  s.position = s.checkpoint = 0;
  s.unlogged = false;
}

void RecurrentStates::Prepare(const Batch& batch, std::span<const int32_t> slots) {
  if (held_.empty()) return;
  // Each sequence's first token and count, and its latest token so far, in members sized by the
  // sequences seen, so that a forward allocates nothing once every sequence has run.
  for (const int32_t seq : order_) runs_[static_cast<std::size_t>(seq)].count = 0;
  order_.clear();
  for (int32_t i = 0; i < batch.size(); ++i) {
    const int32_t seq = batch.seq_ids[i];
    const int32_t pos = batch.positions[i];
    if (seq < 0) Fail("model: sequence ", seq, " is out of range");
    if (static_cast<std::size_t>(seq) >= runs_.size())
      runs_.resize(static_cast<std::size_t>(seq) + 1);
    Run& run = runs_[static_cast<std::size_t>(seq)];
    if (run.count == 0) {
      const bool continues_last =
          batch.parents[i] == -1 && (batch.cache_parents[i] == Batch::kContinueCache ||
                                     batch.cache_parents[i] == slots[i] - 1);
      if (!continues_last && pos != 0) {
        Fail("model: token ", i, " of the batch continues a chosen cache slot of sequence ", seq,
             ", but Gated DeltaNet layers keep one recurrent state per sequence (chains only: "
             "token trees over recurrent state are not supported yet)");
      }
      if (pos != 0 && (pos > position(seq) || pos < checkpoint(seq))) {
        Fail("model: token ", i, " of the batch continues sequence ", seq, " at position ", pos,
             ", but its Gated DeltaNet state can continue only from ", checkpoint(seq), " to ",
             position(seq), " (recurrent state keeps no snapshot of that position)");
      }
      run = {pos, 1, i};
      order_.push_back(seq);
      continue;
    }
    if (batch.parents[i] != run.last_index || pos != run.first_position + run.count) {
      Fail("model: token ", i, " of the batch is not the next of sequence ", seq,
           "'s chain: Gated DeltaNet layers run chains only (token trees over recurrent state "
           "are not supported yet)");
    }
    ++run.count;
    run.last_index = i;
  }
  for (const int32_t seq : order_) {
    const Run& run = runs_[static_cast<std::size_t>(seq)];
    Sequence& s = At(seq);
    if (run.first_position == 0) {
      Reset(s);
    } else if (run.first_position < s.position) {
      s.live = s.saved;
      Replay(s, s.live, s.checkpoint, run.first_position);
      s.position = run.first_position;
    }
    const int32_t end = run.first_position + run.count;
    if (run.count > log_tokens_) {
      s.unlogged = true;  // a prompt: the checkpoint moves to its end (EndBatch)
    } else if (end - s.checkpoint > log_tokens_) {
      // Keep the log within its ring: the checkpoint moves on to where the batch's tokens fit,
      // at least kRecurrentHistory behind its end.
      const int32_t to = std::max(end - log_tokens_, std::min(end - kRecurrentHistory, s.position));
      Replay(s, s.saved, s.checkpoint, to);
      s.checkpoint = to;
    }
  }
}

void RecurrentStates::Record(int32_t seq, int32_t layer, int32_t position, const float* qkv,
                             const float* beta, const float* alpha) {
  Sequence& s = At(seq);
  if (s.unlogged) return;
  const std::size_t slot = static_cast<std::size_t>(position % log_tokens_);
  const auto index = static_cast<std::size_t>(layer_index_[static_cast<std::size_t>(layer)]);
  float* e = s.log.data() + (slot * held_.size() + index) * entry_;
  const std::size_t conv_dim = shape_.conv_dim();
  const std::size_t heads = shape_.n_v_heads;
  std::memcpy(e, qkv, conv_dim * sizeof(float));
  std::memcpy(e + conv_dim, beta, heads * sizeof(float));
  std::memcpy(e + conv_dim + heads, alpha, heads * sizeof(float));
}

void RecurrentStates::EndBatch(const Batch& batch) {
  if (held_.empty()) return;
  for (int32_t i = 0; i < batch.size(); ++i) {
    Sequence& s = At(batch.seq_ids[i]);
    s.position = batch.positions[i] + 1;
  }
  for (int32_t i = 0; i < batch.size(); ++i) {
    Sequence& s = At(batch.seq_ids[i]);
    if (!s.unlogged) continue;
    s.saved = s.live;
    s.checkpoint = s.position;
    s.unlogged = false;
  }
}

void RecurrentStates::Replay(Sequence& s, std::vector<float>& state, int32_t from, int32_t to) {
  const std::size_t conv_dim = shape_.conv_dim();
  const std::size_t heads = shape_.n_v_heads;
  const GatedDeltaNetDims dims{.conv_kernel = shape_.conv_kernel,
                               .d_state = shape_.d_state,
                               .n_k_heads = shape_.n_k_heads,
                               .n_v_heads = shape_.n_v_heads,
                               .eps = config_.rms_eps};
  float* qkv = scratch_.data();
  float* z = qkv + conv_dim;  // zeros: the output is not wanted, only the state
  float* out = z + shape_.value_dim();
  std::fill(z, z + shape_.value_dim(), 0.0f);
  for (int32_t t = from; t < to; ++t) {
    const std::size_t slot = static_cast<std::size_t>(t % log_tokens_);
    for (std::size_t index = 0; index < held_.size(); ++index) {
      const GatedDeltaNetWeights& w = weights_.layers[static_cast<std::size_t>(held_[index])].gdn;
      const float* e = s.log.data() + (slot * held_.size() + index) * entry_;
      std::memcpy(qkv, e, conv_dim * sizeof(float));
      float* values = state.data() + index * state_size_;
      GatedDeltaNetToken(dims,
                         {.conv = w.conv.data(),
                          .dt_bias = w.dt_bias.data(),
                          .a = w.a.data(),
                          .norm = w.norm.data()},
                         {.conv = values, .delta = values + shape_.conv_state_size()}, qkv, z,
                         e + conv_dim, e + conv_dim + heads, out);
    }
  }
}

std::size_t RecurrentStates::StateOffset(int32_t layer) const {
  const int32_t index = layer_index_[static_cast<std::size_t>(layer)];
  GROVE_CHECK(index >= 0, "recurrent state: layer is not a held recurrent layer");
  return static_cast<std::size_t>(index) * state_size_;
}

float* RecurrentStates::conv(int32_t seq, int32_t layer) {
  return At(seq).live.data() + StateOffset(layer);
}

float* RecurrentStates::delta(int32_t seq, int32_t layer) {
  return conv(seq, layer) + shape_.conv_state_size();
}

int32_t RecurrentStates::position(int32_t seq) const {
  return seq >= 0 && static_cast<std::size_t>(seq) < sequences_.size()
             ? sequences_[static_cast<std::size_t>(seq)].position
             : 0;
}

int32_t RecurrentStates::checkpoint(int32_t seq) const {
  return seq >= 0 && static_cast<std::size_t>(seq) < sequences_.size()
             ? sequences_[static_cast<std::size_t>(seq)].checkpoint
             : 0;
}

void RecurrentStates::Copy(int32_t parent, int32_t child) {
  if (held_.empty()) return;
  At(std::max(parent, child));  // sized for both, so neither reference moves
  Sequence copy = At(parent);
  At(child) = std::move(copy);
}

uint64_t RecurrentStates::bytes() const {
  uint64_t n = 0;
  for (const Sequence& s : sequences_)
    n += (s.live.size() + s.saved.size() + s.log.size()) * sizeof(float);
  return n;
}

}  // namespace grove
