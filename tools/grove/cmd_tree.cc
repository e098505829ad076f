// grove tree: the optimal Sequoia tree for an acceptance vector and a node budget, its expected
// tokens per step G(n) or G(n, d), and (given the hardware profile) the predicted speedup.
#include <cstdio>
#include <string>

#include "base/error.h"
#include "commands.h"
#include "option_checks.h"
#include "output_path.h"
#include "speculate/plan_files.h"
#include "speculate/sequoia.h"
#include "speculate/tree_plan.h"

namespace grove::cli {
namespace {

struct TreeOptions {
  std::string accept, profile, out;
  int32_t budget = 16;
  int32_t max_depth = 0;
  double draft_cost = -1;  // seconds per level; < 0: from the acceptance file
  bool dot = false;
};

void RunTree(const TreeOptions& o) {
  if (o.budget < 2 || o.budget > 1024)
    Fail("--budget ", o.budget, " must be in 2..1024 (tokens, root included)");
  if (o.max_depth < 0 || o.max_depth > o.budget)
    Fail("--max-depth ", o.max_depth, " must be in 1..budget");
  if (!o.out.empty()) CheckOutputFile(o.out, "-o", {.inputs = {o.accept, o.profile}});
  AcceptanceFile accept = ReadAcceptanceFile(o.accept);
  // With --dot, stdout carries the graph alone (`grove tree --dot | dot -Tsvg`); the summary lines
  // go to stderr.
  FILE* summary = o.dot ? stderr : stdout;
  TokenTree tree;
  if (!o.profile.empty()) {
    TreePlanInputs inputs{.acceptance = accept.acceptance,
                          .verify_cost = ReadVerifyProfile(o.profile),
                          .draft_seconds_per_level =
                              o.draft_cost >= 0 ? o.draft_cost : accept.draft_seconds_per_level,
                          .max_tokens = o.budget};
    TreePlan spec = ParseTreePlan("sequoia:auto", inputs);
    const SizeDepthChoice& c = *spec.sequoia_choice;
    tree = spec.shape;
    if (c.size == 1) {
      std::fprintf(
          summary,
          "hardware-aware choice: plain decoding | no tree up to %d tokens is predicted faster "
          "than one token per t(1) = %.3f ms with c = %.3f ms per draft level\n",
          o.budget, 1e3 * c.step_seconds, 1e3 * inputs.draft_seconds_per_level);
    } else {
      std::fprintf(summary,
                   "hardware-aware choice: n = %d tokens, depth %d | G(n,d) = %.3f tokens/step | "
                   "step %.3f ms (verify t(n) + d x c, c = %.3f ms) | predicted %.1f t/s, "
                   "speedup %.2fx over plain decoding\n",
                   c.size, c.depth, c.expected_tokens, 1e3 * c.step_seconds,
                   1e3 * inputs.draft_seconds_per_level, c.tokens_per_second, c.speedup);
    }
  } else {
    SequoiaTable table = SequoiaTable::Build(accept.acceptance, o.budget, o.max_depth);
    tree = o.max_depth ? table.Tree(o.budget, o.max_depth) : table.Tree(o.budget);
    std::fprintf(summary, "optimal tree of %d tokens%s: G = %.3f tokens/step\n", o.budget,
                 o.max_depth ? (", depth <= " + std::to_string(o.max_depth)).c_str() : "",
                 o.max_depth ? table.Value(o.budget, o.max_depth) : table.Value(o.budget));
    std::fprintf(summary, "G(n) for smaller budgets:");
    for (int32_t n = 2; n <= o.budget; n *= 2) {
      std::fprintf(summary, " G(%d) = %.3f", n,
                   o.max_depth ? table.Value(n, o.max_depth) : table.Value(n));
    }
    std::fprintf(summary, "\n");
  }
  std::printf("%s", o.dot ? tree.ToDot().c_str() : tree.ToText().c_str());
  if (!o.out.empty()) {
    WriteTreeFile(o.out, tree);
    std::fprintf(summary, "wrote %s (use it with --spec file:%s)\n", o.out.c_str(), o.out.c_str());
  }
}

}  // namespace

void AddTreeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tree", "Print the optimal Sequoia tree for an acceptance vector and budget");
  auto o = std::make_shared<TreeOptions>();
  cmd->add_option("--accept", o->accept, "Acceptance vector JSON (grove calibrate)")->required();
  cmd->add_option("--profile", o->profile,
                  "Verify-cost profile JSON (grove bench --profile-out): choose n and d");
  cmd->add_option("--budget", o->budget, "Most tokens verified per step, root included")
      ->capture_default_str();
  cmd->add_option("--max-depth", o->max_depth, "Depth bound, root level included (0: none)")
      ->capture_default_str();
  cmd->add_option("--draft-cost", o->draft_cost, "Draft seconds per level (default: from --accept)")
      ->check(FiniteRange(0.0, 3600.0));
  cmd->add_flag("--dot", o->dot, "Print Graphviz DOT instead of text");
  cmd->add_option("-o,--out", o->out, "Also write the shape as a tree file for --spec file:");
  cmd->callback([o] { RunTree(*o); });
}

}  // namespace grove::cli
