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
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "speculate/opt_tree.h"
#include "speculate/sequoia.h"
#include "speculate/token_tree.h"

namespace grove {

enum class TreeKind { kChain, kKConfig, kFile, kSequoia, kOpt };

// What `sequoia:` specs need. Each is optional until a spec asks for it.
struct TreePlanInputs {
  std::vector<double> acceptance;                 // p_1..p_W
  std::optional<VerifyCostCurve> verify_cost;     // t(n), seconds, n counts the root
  double draft_seconds_per_level = 0.0;           // c
  int32_t max_tokens = 1024;                      // largest verify batch allowed (root included)
};

struct TreePlan {
  TreeKind kind = TreeKind::kChain;
  std::string text;            // as written, for logs and tables
  TokenTree shape;             // static kinds: the shape, tokens kNoToken, prob = positional guess
  OptTreeParams opt;           // kOpt
  std::optional<SizeDepthChoice> sequoia_choice;  // sequoia:auto: what was chosen and why

  bool is_static() const { return kind != TreeKind::kOpt; }
  // Most nodes a tree of this spec can have (the verify batch holds one more: the root).
  int32_t max_nodes() const { return is_static() ? shape.size() : opt.n_nodes; }
};

// Throws grove::Error naming what is wrong: unknown kind, bad numbers, a budget beyond
// inputs.max_tokens, a sequoia spec without an acceptance vector, a malformed tree file.
TreePlan ParseTreePlan(std::string_view text, const TreePlanInputs& inputs);

// Static shape files: {"parents": [...]} with nodes in level order (-1: child of the root).
TokenTree ReadTreeFile(const std::string& path);
std::string TreeShapeJson(const TokenTree& shape);

// Acceptance vectors as `grove calibrate` writes them: {"acceptance": [p_1, ...],
// "draft_seconds_per_level": c, ...}; c is 0 when absent.
struct AcceptanceFile {
  std::vector<double> acceptance;
  double draft_seconds_per_level = 0.0;
};
AcceptanceFile ReadAcceptanceFile(const std::string& path);
// Verify-cost profiles as `grove bench --verify-curve --profile-out` writes them; the curve's n counts
// the verified tokens (root included).
VerifyCostCurve ReadVerifyProfile(const std::string& path);

}  // namespace grove
