// The recurrent state of Gated DeltaNet layers (layer_kind.h), per sequence, and how it follows the
// KV cache through speculation: chains, token trees (one forward verifying every node), rewinds
// and forks. Unlike a KV cache a recurrent state cannot be truncated: a token, once absorbed, is in
// it for good. So each sequence keeps
//
//   base     the state after its committed text [0, base) (every held layer's conv window and
//            delta-rule state, config.h's GatedDeltaNetShape);
//   pending  the tokens run since, as a tree of nodes (position, token, parent), each with its
//            recurrence inputs on each layer (conv input, beta and alpha: a few kilobytes, no
//            matrix products to redo), from which any node's state is replayed from the base;
//   main     one more full state: the state of one pending node (main_end), the end of the path
//            the last batch ran in place (the first child at each branch: the drafter's best);
//   checkpoint and ring  the state at an earlier committed position and the inputs of the
//            committed tokens since, so a truncation behind the base replays from there.
//
// A batch's token continues a cache slot; the slot's ancestry in the cache (KvCache::parent,
// token, position) names the pending node whose state it continues, so the state follows whatever
// the cache's owner did to it (Compact after verification, Truncate, KeepSubtree) without being
// told. Within a batch each sequence's tokens are walked depth first, each node's state its
// parent's updated by its token: a branch's first node writes out of place into a fresh buffer
// (its parent's state stays for the siblings), the first child continues in place, so a tree of
// n nodes costs n token updates and holds at most (branch depth + 1) layer states beside base and
// main, whatever its width. A node's output is therefore the bits of its path decoded alone
// (contract 2 on recurrent layers).
//
// Commit: a batch continuing the end of a cache that holds a chain only (what a session leaves
// after Compact, or plain decoding) makes that chain's pending path committed: main becomes the
// base when it holds the path's end (no work: plain decoding and fully accepted drafts), else the
// path is replayed onto the base (the accepted tokens of a partly rejected tree, no more). The
// committed inputs go to the ring; the checkpoint trails the base by at most 2 kRecurrentHistory
// tokens and moves on to at least kRecurrentHistory behind it, or to the end of a chain batch
// longer than the ring (a prompt, whose inputs are not kept).
//
// What the state cannot follow is refused by name before anything changes, never computed from
// the wrong state: a truncation behind the checkpoint, a slot holding a token the state never
// absorbed, a token not at the position after the one it continues, a replay through a prompt's
// unkept inputs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/config.h"

namespace grove {

struct Batch;
struct ModelWeights;
class KvCachePool;

// Committed tokens back from the base that a truncation can always reach (after a batch of at
// most as many tokens; a longer chain batch, a prompt, moves the checkpoint to its end).
inline constexpr int32_t kRecurrentHistory = 32;
// Pending tokens a sequence may hold beyond its committed text (speculative trees kept in the
// cache across batches); more is refused by name.
inline constexpr int32_t kMaxPendingTokens = 4096;

class RecurrentStates {
 public:
  // States of the recurrent layers among [first_layer, last_layer) of `config`, whose weights
  // (kept by reference) replay logged tokens.
  RecurrentStates(const ModelConfig& config, const ModelWeights& weights, int32_t first_layer,
                  int32_t last_layer);

  // Before a batch's tokens are appended to the caches: resolves the state each token continues
  // (throws grove::Error naming the token and sequence before changing anything), then commits,
  // rewinds or starts again each sequence as its cache says, and plans the batch's walk.
  void Prepare(const Batch& batch, const KvCachePool& caches);
  // One recurrent layer of the prepared batch: every token through its state, in the planned
  // order. qkv (conv_dim per token) is overwritten; z (value_dim), beta and alpha (n_v_heads)
  // are the other projections; out (value_dim per token) receives the outputs.
  void RunLayer(int32_t layer, float* qkv, const float* z, const float* beta, const float* alpha,
                float* out);

  // The earliest position a batch can continue sequence `seq` from (besides 0).
  int32_t checkpoint(int32_t seq) const;
  // The child continues as the parent (a fork, kv_cache_pool.h): states, pending tree and log.
  void Copy(int32_t parent, int32_t child);
  uint64_t bytes() const;
  // Seconds sequence `seq` spent committing, rewinding and replaying states (the step's `state`
  // part), since it was first run (a fork starts from its parent's).
  double state_seconds(int32_t seq) const;

 private:
  struct Node {
    int32_t position;
    int32_t token;
    int32_t parent;  // a pending node, or -1: the base
    bool logged;     // its inputs are kept (a prompt's are not)
  };
  struct Sequence {
    int32_t base = 0;            // tokens `live` has absorbed
    int32_t checkpoint = 0;      // tokens `saved` has absorbed; the ring covers [checkpoint, base)
    int32_t main_end = -1;       // the pending node whose state `main` holds, -1: none
    double seconds = 0.0;        // state_seconds
    std::vector<float> live;     // (held layers) conv state then delta state
    std::vector<float> main;     // the same, of node main_end
    std::vector<float> saved;    // the same, at the checkpoint
    std::vector<float> ring;     // (log_tokens_, held layers, entry_) by position % log_tokens_
    std::vector<Node> nodes;     // pending, parents first
    std::vector<float> entries;  // (nodes, held layers, entry_)
  };
  // A state a planned step reads or writes: the sequence's base or main, or a scratch buffer.
  static constexpr int32_t kLive = -1;
  static constexpr int32_t kMain = -2;
  struct Step {
    int32_t seq;
    int32_t token;  // the batch token run, or -1: replaying pending node `node`
    int32_t node;
    int32_t from;  // kLive, kMain or a scratch buffer
    int32_t to;
  };
  // What Prepare found for one sequence of the batch.
  struct Plan {
    enum Kind : uint8_t { kKeep, kStart, kRewind, kCommit };
    Kind kind = kKeep;
    int32_t rewind_to = 0;  // kRewind: the base's new position
    int32_t commit = -1;    // kCommit: the pending node that becomes the base (-1: none)
    int32_t count = 0;      // its batch tokens
    bool chain = true;      // they form one chain
  };

  Sequence& At(int32_t seq);
  std::size_t StateOffset(int32_t layer) const;
  // The pending node cache slot `slot` of sequence `seq` holds (-1: the base's last token),
  // matched through the slot's ancestors; throws grove::Error naming token i when there is none.
  int32_t FindNode(const Sequence& s, const KvCachePool& caches, int32_t seq, int32_t slot,
                   int32_t i);
  // Commits pending node `node` (and its ancestors) as s's base and drops the other nodes.
  void Commit(Sequence& s, int32_t node);
  // Replays committed positions [from, to) of s's ring through `state` (live or saved).
  void ReplayRing(Sequence& s, std::vector<float>& state, int32_t from, int32_t to);
  // Moves s's checkpoint on so that the ring can take positions up to `end`.
  void MakeRoom(Sequence& s, int32_t end);
  // Plans the walk of sequence `seq`'s batch tokens (Prepare).
  void PlanWalk(const Batch& batch, int32_t seq, Sequence& s, const Plan& plan);
  // Appends the steps of the subtrees under the sibling list starting at batch token `first`,
  // reading state `from` and running the first child's chain in `to`; returns the last node
  // written to `to` (-1 when none).
  int32_t PlanSubtrees(int32_t seq, int32_t first, int32_t from, int32_t to);
  // The first root of `seq` in the batch continuing the node `root` continues.
  int32_t GroupHead(const Batch& batch, int32_t seq, int32_t root) const;
  int32_t AcquireScratch();
  // One logged token's update of held layer `index` (its inputs `entry`), from one state to
  // another (or in place).
  void ReplayToken(const float* entry, std::size_t index, const float* from, float* to);
  float* StateOf(Sequence& s, int32_t buffer, int32_t layer);
  float* Entry(Sequence& s, int32_t node, int32_t layer);
  float* RingEntry(Sequence& s, int32_t position, std::size_t index);
  void Reset(Sequence& s);

  const ModelConfig& config_;
  const ModelWeights& weights_;
  GatedDeltaNetShape shape_;
  std::vector<int32_t> held_;         // the held recurrent layers, in order
  std::vector<int32_t> layer_index_;  // (n_layer) index among held_, or -1
  std::size_t state_size_ = 0;        // floats of one layer's state
  std::size_t entry_ = 0;             // floats of one token's inputs on one layer
  int32_t log_tokens_ = 2 * kRecurrentHistory;
  std::vector<Sequence> sequences_;
  // The prepared batch (sized by the largest seen, so a forward allocates nothing once every
  // sequence and tree size has run).
  std::vector<Plan> plans_;            // by sequence
  std::vector<int32_t> order_;         // the batch's sequences, in order of first token
  std::vector<int32_t> anchor_;        // (batch) a root's continued node (-1: base); else -2
  std::vector<int32_t> node_of_;       // (batch) the pending node each token becomes
  std::vector<int32_t> first_child_;   // (batch) among the batch's tokens, -1: none
  std::vector<int32_t> next_sibling_;  // (batch)
  std::vector<int32_t> last_child_;    // (batch)
  std::vector<int32_t> path_;          // a slot's ancestry (FindNode), a node's (replays)
  std::vector<Step> steps_;
  std::vector<std::vector<float>> scratch_states_;  // one layer's state each
  std::vector<int32_t> free_scratch_;
  std::vector<float> scratch_;  // a replayed token's conv input, gate and output
};

}  // namespace grove
