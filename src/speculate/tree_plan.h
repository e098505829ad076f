// Tree plans: what users write after `--spec`, and the static shapes (or the adaptive rule) they
// stand for:
//   chain:K          K draft tokens in a row
//   kconfig:a,b,c    a children of the root, b children of each of those, ... (SEED's (2,2,1))
//   file:TREE.json   a static shape: {"parents": [-1, -1, 0, 0, 1, ...]} in level order
//   sequoia:N[,D]    Sequoia's optimal tree of N tokens (root included) and depth at most D, from
//                    an acceptance vector (--accept, written by `grove calibrate`)
//   sequoia:auto     Sequoia's hardware-aware choice of (N, D): G(N, D) / (t(N) + D c), from the
//                    acceptance vector, the target's verify curve t(n) and the draft cost c
//   opt:N,δ          OPT-Tree: rebuilt every step from draft probabilities, N nodes, stop at gain δ
//   auto[:N]         the auto planner (speculate/auto_planner.h) picks a Sequoia tree of at most N
//                    tokens (root included; default kAutoMaxTokens), or no speculation, from the
//                    verify cost, draft cost and acceptance it measures while decoding
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "speculate/opt_tree.h"
#include "speculate/sequoia.h"
#include "speculate/token_tree.h"

namespace grove {

class VerifyCostCache;

enum class TreeKind { kChain, kKConfig, kFile, kSequoia, kOpt, kAuto };

// Largest verify batch (root included) `auto` considers unless told otherwise: past 32 tokens the
// verify forward of every model grove targets costs several plain steps, which no tree repays.
inline constexpr int32_t kAutoMaxTokens = 32;

// What `sequoia:` specs need. Each is optional until a spec asks for it.
struct TreePlanInputs {
  std::vector<double> acceptance;              // p_1..p_W
  std::optional<VerifyCostCurve> verify_cost;  // t(n), seconds, n counts the root
  double draft_seconds_per_level = 0.0;        // c
  int32_t max_tokens = 1024;                   // largest verify batch allowed (root included)
  // Where `auto` keeps the verify curves it measures (nullptr: nowhere; ReadPlanInputs gives
  // the user's cache directory).
  std::shared_ptr<const VerifyCostCache> verify_cost_cache;
  // Whether `file:PATH` may name a tree file. A server's plans for its requests say false: a
  // client must not have the server read (and tell of) whatever file it names.
  bool tree_files = true;
};

struct TreePlan {
  TreeKind kind = TreeKind::kChain;
  std::string text;   // as written, for logs and tables
  TokenTree shape;    // fixed kinds: the shape, tokens kNoToken, prob = positional guess
  OptTreeParams opt;  // kOpt
  int32_t auto_max_tokens = kAutoMaxTokens;       // kAuto: largest verify batch, root included
  std::optional<SizeDepthChoice> sequoia_choice;  // sequoia:auto: what was chosen and why

  // Every step's tree has a static shape (fixed, or chosen by the auto planner) whose nodes are
  // filled by the child draw; OPT-Tree alone shapes its tree from the draft probabilities.
  bool is_static() const { return kind != TreeKind::kOpt; }
  bool is_auto() const { return kind == TreeKind::kAuto; }
  // Nodes a step may ask the drafter to expand: the tree's, or OPT-Tree's drafted layers (n
  // candidates each, up to its depth cap), of which the verified tree keeps n.
  int32_t max_drafted_nodes() const {
    return is_static() ? max_nodes() : opt.n_nodes * opt.depth_cap();
  }
  // Most nodes a tree of this plan can have (the verify batch holds one more: the root).
  int32_t max_nodes() const {
    return is_auto() ? auto_max_tokens - 1 : is_static() ? shape.size() : opt.n_nodes;
  }
};

// Throws grove::Error naming what is wrong: unknown kind, bad numbers, a budget beyond
// inputs.max_tokens, a sequoia spec without an acceptance vector, a malformed tree file or one
// where inputs.tree_files is false.
TreePlan ParseTreePlan(std::string_view text, const TreePlanInputs& inputs);

}  // namespace grove
