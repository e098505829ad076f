// The recurrent state of Gated DeltaNet layers (layer_kind.h), per sequence: each layer's conv
// window and delta-rule state (config.h's GatedDeltaNetShape), and the number of tokens it has
// absorbed. Unlike a KV cache it cannot be truncated: a token, once absorbed, is in the state for
// good. Speculation rewinds (a rejected draft token was absorbed by the verify batch), so each
// sequence keeps, beside its live state, a checkpoint: the state at an earlier position, and the
// recurrence inputs of every token since (conv input, beta and alpha: a few kilobytes per token
// and layer, no matrix products to redo). A batch continuing at an earlier position restores the
// checkpoint and replays the logged tokens up to it, bit for bit what the forward computed. The
// checkpoint trails the live state by at most 2 kRecurrentHistory tokens; it moves on to at least
// kRecurrentHistory tokens behind it, or to the end of a batch longer than its log (a prompt), so
// a rewind reaches back kRecurrentHistory tokens or to the end of the last prompt.
//
// What the state cannot follow is refused by name, never computed from the wrong state: a batch
// continuing a sequence before its checkpoint, a token that continues a chosen cache slot or is
// not the next of its sequence's chain (token trees over recurrent state are not supported yet).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/config.h"

namespace grove {

struct Batch;
struct ModelWeights;

// Tokens back from the live state that a rewind can always reach (after a batch of at most as
// many tokens; a longer batch, a prompt, moves the checkpoint to its end).
inline constexpr int32_t kRecurrentHistory = 32;

class RecurrentStates {
 public:
  // States of the recurrent layers among [first_layer, last_layer) of `config`, whose weights
  // (kept by reference) replay logged tokens.
  RecurrentStates(const ModelConfig& config, const ModelWeights& weights, int32_t first_layer,
                  int32_t last_layer);

  // Before a batch runs: checks that every sequence's tokens form one causal chain starting at
  // position 0, at the position its state has reached, or at an earlier one its checkpoint
  // reaches (throws grove::Error naming the token and sequence before changing anything); then
  // starts again the sequences at 0 and rewinds the others that continue earlier. slots: the
  // cache slot of each token (BatchLayout), a sequence's new slots following its last one; a
  // token may name the cache slot it continues (Batch::cache_parents) only when it is that last
  // one, the slot the state followed.
  void Prepare(const Batch& batch, std::span<const int32_t> slots);
  // What the forward does for each token on each recurrent layer, in batch order: logs the
  // token's recurrence inputs (before the forward overwrites them).
  void Record(int32_t seq, int32_t layer, int32_t position, const float* qkv, const float* beta,
              const float* alpha);
  // After the batch: each sequence's state has absorbed its tokens.
  void EndBatch(const Batch& batch);

  float* conv(int32_t seq, int32_t layer);
  float* delta(int32_t seq, int32_t layer);
  // Tokens sequence `seq` has absorbed (0 for one never run).
  int32_t position(int32_t seq) const;
  // The earliest position a batch can continue sequence `seq` from (besides 0).
  int32_t checkpoint(int32_t seq) const;
  // The child continues as the parent (a fork, kv_cache_pool.h): state, checkpoint and log.
  void Copy(int32_t parent, int32_t child);
  uint64_t bytes() const;

 private:
  struct Sequence {
    int32_t position = 0;  // tokens the live state has absorbed
    int32_t checkpoint =
        0;  // tokens the saved state has absorbed; log covers [checkpoint, position)
    bool unlogged = false;     // the running batch is longer than the log: checkpoint at its end
    std::vector<float> live;   // (held layers) conv state then delta state
    std::vector<float> saved;  // the same at the checkpoint
    std::vector<float> log;    // (log_tokens_, held layers, entry_) by position % log_tokens_
  };
  // One sequence's tokens in the running batch (Prepare): its first token and count, and its
  // latest token so far; count 0 when the batch holds none of it.
  struct Run {
    int32_t first_position = 0;
    int32_t count = 0;
    int32_t last_index = 0;
  };
  Sequence& At(int32_t seq);
  std::size_t StateOffset(int32_t layer) const;
  // Runs the logged tokens [from, to) of `s` through `state` (live or saved).
  void Replay(Sequence& s, std::vector<float>& state, int32_t from, int32_t to);
  void Reset(Sequence& s);

  const ModelConfig& config_;
  const ModelWeights& weights_;
  GatedDeltaNetShape shape_;
  std::vector<int32_t> held_;         // the held recurrent layers, in order
  std::vector<int32_t> layer_index_;  // (n_layer) index among held_, or -1
  std::size_t state_size_ = 0;        // floats of one layer's state
  std::size_t entry_ = 0;             // floats of one token's log on one layer
  int32_t log_tokens_ = 2 * kRecurrentHistory;
  std::vector<Sequence> sequences_;
  std::vector<Run> runs_;       // by sequence; grows only when a new sequence first runs
  std::vector<int32_t> order_;  // the sequences of the running batch, in order of first token
  std::vector<float> scratch_;  // a replayed token's conv input, gate and output
};

}  // namespace grove
