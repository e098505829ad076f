// What proposes draft tokens: a small model, or a cheap guesser such as prompt lookup. The tree
// builder (speculate/tree_builder.h) asks a drafter for next-token logits one tree level at a time
// and decides itself what to make of them (a distribution to sample from, or a ranking); the
// session tells the drafter which nodes the target accepted.
//
// A drafter serves one sequence at a time (it holds that sequence's draft state, e.g. a KV cache).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "speculate/token_tree.h"

namespace grove {

class LookupMatches;
class NodeAttribution;
class StepOutlook;
class TargetFeatureReader;

// What a speculation policy needs to know of a drafter (speculate/speculation.h), known without
// one: a server or search resolves policies before any drafting lane exists.
struct DrafterTraits {
  std::string name;
  bool deterministic = false;  // Drafter::deterministic
};

// Optional capabilities, each an interface of its own that a drafter may implement, null where it
// does not: a drafter that reads the target's hidden states is handed them
// (speculate/target_feature_reader.h); a drafter made of several says which of them proposed each
// node (speculate/node_attribution.h), and what a step's drafting will cost and be worth before its
// tree is chosen (speculate/draft_outlook.h); a drafter that looks its rows up in text says how
// long each row's match was (speculate/lookup_matches.h). A new capability is a field here, not a
// virtual of every drafter.
struct DrafterCapabilities {
  TargetFeatureReader* feature_reader = nullptr;
  const NodeAttribution* attribution = nullptr;
  StepOutlook* outlook = nullptr;
  const LookupMatches* lookup_matches = nullptr;
};

// Three actions (Begin, Expand, Commit) on the sequence a drafter serves, what a session must know
// of it (name, vocabulary, whether its rows are guesses, room, reservations), and its capabilities.
class Drafter {
 public:
  Drafter() = default;
  // Capabilities point into the drafter itself: a copy would point into the original.
  Drafter(const Drafter&) = delete;
  Drafter& operator=(const Drafter&) = delete;
  virtual ~Drafter() = default;

  virtual std::string_view name() const = 0;
  virtual int32_t n_vocab() const = 0;
  // True when the logits are guesses (one token per row, or none) rather than a distribution the
  // children are sampled from: only verification rules that are lossless for any tree may then be
  // used, and children are always the top guesses (speculate/speculation.h decides this).
  virtual bool deterministic() const = 0;
  DrafterTraits traits() const { return {std::string(name()), deterministic()}; }

  // Called by a session before its first step: whether the tree builder samples children from
  // this drafter's rows (a non-deterministic drafter under a rejection rule) or takes their top
  // guesses. A drafter whose rows are the same either way ignores it; a mixture ranks the
  // candidates of its members in the one case and hands over one member's distribution in the
  // other (speculate/drafter_mixture.h).
  virtual void SampleChildren(bool sampled) { (void)sampled; }

  // Called by a session before its first step: whether Begin may keep what the drafter's own
  // caches hold of the new context (a conversation's earlier turns), token for token, and feed
  // only the rest; its rows are then the same as after a cold Begin. Off (the default), Begin
  // starts from an empty cache. A drafter without a cache ignores it.
  virtual void ReuseCache(bool reuse) { (void)reuse; }

  // Starts a sequence whose committed tokens are `context`; the last one is the root of the first
  // tree (it is not in the target's KV cache yet either).
  virtual void Begin(std::span<const int32_t> context) = 0;

  // Returns, for each frontier node of `tree` (-1 is the root), the logits of the token that
  // follows it: frontier.size() rows of n_vocab() floats, valid until the next call. -inf marks a
  // token the drafter does not propose; a row of -inf proposes nothing. A step starts with the
  // frontier {-1}; later calls pass one level at a time, in order, each node's parent expanded
  // before it. `tree` only grows between calls of one step (new nodes are appended).
  virtual std::span<const float> Expand(const TokenTree& tree,
                                        std::span<const int32_t> frontier) = 0;

  // Ends a step: `accepted` are the nodes of `tree` the target accepted, root to leaf, where `tree`
  // is the tree the drafter expanded this step (OPT-Tree's drafted layers, of which the verified
  // tree is a selection; possibly empty); `next_token` follows them and becomes the root of the
  // next step. A step without a tree (plain decoding) commits nothing but the next token.
  virtual void Commit(const TokenTree& tree, std::span<const int32_t> accepted,
                      int32_t next_token) = 0;

  // Ends the sequence: it emitted its last token (not called for one abandoned midway). A drafter
  // that learns from what was generated (speculate/suffix_drafter.h) keeps it now.
  virtual void End() {}

  // Grows what the drafter keeps per call and per tree node to frontiers of `max_frontier` nodes
  // and trees of `max_tree_nodes` (OPT-Tree's drafted layers included), so that steps do not
  // allocate.
  virtual void Reserve(int32_t max_frontier, int32_t max_tree_nodes) = 0;

  // Whether a step that expands up to `fed_nodes` tree nodes (in Expand calls after the first)
  // still fits the drafter's cache beside the committed text; drafters without a cache always fit.
  // The session speculates only while it does, and decodes plainly after that.
  virtual bool HasRoomFor(int32_t fed_nodes) const = 0;

  // The optional capabilities (DrafterCapabilities), null where the drafter lacks them.
  TargetFeatureReader* feature_reader() { return capabilities_.feature_reader; }
  const NodeAttribution* attribution() const { return capabilities_.attribution; }
  StepOutlook* outlook() { return capabilities_.outlook; }
  const LookupMatches* lookup_matches() const { return capabilities_.lookup_matches; }

 protected:
  // A drafter with capabilities offers them once, from its constructor.
  void Offer(const DrafterCapabilities& capabilities) { capabilities_ = capabilities; }

 private:
  DrafterCapabilities capabilities_;
};

}  // namespace grove
