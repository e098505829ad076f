#include "speculate/tree_plan.h"

#include <charconv>
#include <cmath>

#include "base/error.h"
#include "speculate/plan_files.h"

namespace grove {
namespace {

std::vector<double> ParseNumbers(std::string_view list, std::string_view spec) {
  std::vector<double> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string item(list.substr(start, end - start));
    char* stop = nullptr;
    double v = std::strtod(item.c_str(), &stop);
    if (item.empty() || stop != item.c_str() + item.size()) {
      Fail("tree spec '", spec, "': '", item, "' is not a number");
    }
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

int32_t PositiveInt(double v, std::string_view what, std::string_view spec, int32_t max) {
  // The range first: converting a double outside int32 (1e300, inf, nan) is undefined.
  if (!(v >= 1 && v <= max) || v != std::floor(v)) {
    Fail("tree spec '", spec, "': ", what, " ", v, " must be a whole number from 1 to ", max);
  }
  return static_cast<int32_t>(v);
}

// Positional guesses for static shapes: a node of rank k gets prob 1 / (k + 2), so E(A) is a rough,
// clearly labelled estimate; real trees carry draft probabilities.
TokenTree KConfigShape(const std::vector<int32_t>& widths) {
  TokenTree shape;
  std::vector<int32_t> level = {-1};
  for (int32_t width : widths) {
    std::vector<int32_t> next;
    for (int32_t parent : level) {
      for (int32_t k = 0; k < width; ++k)
        next.push_back(shape.AddChild(parent, kNoToken, 1.0f / (k + 2)));
    }
    level = std::move(next);
  }
  return shape;
}

// kconfig's branching factors, level by level; the tree they make has at most max_nodes nodes.
std::vector<int32_t> ParseWidths(std::string_view args, std::string_view text, int32_t max_nodes) {
  std::vector<int32_t> widths;
  int64_t nodes = 0, level = 1;
  for (double v : ParseNumbers(args, text)) {
    widths.push_back(PositiveInt(v, "branching", text, max_nodes));
    level *= widths.back();
    nodes += level;
    if (nodes > max_nodes) Fail("tree spec '", text, "' has more than ", max_nodes, " nodes");
  }
  return widths;
}

// sequoia:N, sequoia:N,D or sequoia:auto (the size and depth the verify curve favours).
void ParseSequoia(std::string_view args, std::string_view text, const TreePlanInputs& inputs,
                  TreePlan& spec) {
  spec.kind = TreeKind::kSequoia;
  if (inputs.acceptance.empty()) {
    Fail("tree spec '", text,
         "' needs an acceptance vector: run `grove calibrate` and pass --accept FILE");
  }
  if (args == "auto") {
    if (!inputs.verify_cost) {
      Fail("tree spec '", text,
           "' needs the target's verify curve (--profile FILE from "
           "`grove bench --verify-curve ... --profile-out FILE`)");
    }
    const int32_t max_size = std::min(inputs.verify_cost->max_size(), inputs.max_tokens);
    SequoiaTable table = SequoiaTable::Build(inputs.acceptance, max_size, std::min(max_size, 16));
    spec.sequoia_choice =
        ChooseSizeAndDepth(table, *inputs.verify_cost, inputs.draft_seconds_per_level);
    spec.shape = table.Tree(spec.sequoia_choice->size, spec.sequoia_choice->depth);
  } else {
    auto v = ParseNumbers(args, text);
    if (v.empty() || v.size() > 2) Fail("tree spec '", text, "': sequoia takes N or N,D");
    const int32_t n = PositiveInt(v[0], "size", text, inputs.max_tokens);
    if (n < 2) Fail("tree spec '", text, "': size counts the root, so it must be at least 2");
    if (v.size() == 2) {
      const int32_t d = PositiveInt(v[1], "depth", text, n);
      spec.shape = SequoiaTable::Build(inputs.acceptance, n, d).Tree(n, d);
    } else {
      spec.shape = SequoiaTable::Build(inputs.acceptance, n).Tree(n);
    }
  }
  // sequoia:auto may find that no tree beats plain decoding: the shape is then empty.
  if (spec.shape.empty() && !spec.sequoia_choice)
    Fail("tree spec '", text, "' gives an empty tree");
}

}  // namespace

TreePlan ParseTreePlan(std::string_view text, const TreePlanInputs& inputs) {
  TreePlan spec;
  spec.text = std::string(text);
  const std::string default_auto =
      "auto:" + std::to_string(std::min(kAutoMaxTokens, inputs.max_tokens));
  if (text == "auto") text = default_auto;
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon + 1 == text.size()) {
    Fail("tree spec '", text,
         "': expected KIND:ARGS (chain:4, kconfig:2,2,1, file:T.json, sequoia:32, "
         "sequoia:auto, opt:32,0.2)");
  }
  const std::string_view kind = text.substr(0, colon);
  const std::string_view args = text.substr(colon + 1);
  const int32_t max_nodes = inputs.max_tokens - 1;
  if (kind == "chain") {
    spec.kind = TreeKind::kChain;
    auto v = ParseNumbers(args, text);
    if (v.size() != 1) Fail("tree spec '", text, "': chain takes one number, the chain length");
    const int32_t k = PositiveInt(v[0], "chain length", text, max_nodes);
    spec.shape = KConfigShape(std::vector<int32_t>(k, 1));
  } else if (kind == "kconfig") {
    spec.kind = TreeKind::kKConfig;
    spec.shape = KConfigShape(ParseWidths(args, text, max_nodes));
  } else if (kind == "file") {
    if (!inputs.tree_files) {
      Fail("tree spec '", text, "': tree files are not read for this plan (a request names no ",
           "file of the server's); give chain, kconfig, sequoia, opt or auto");
    }
    spec.kind = TreeKind::kFile;
    spec.shape = ReadTreeFile(std::string(args), max_nodes);
  } else if (kind == "sequoia") {
    ParseSequoia(args, text, inputs, spec);
  } else if (kind == "auto") {
    spec.kind = TreeKind::kAuto;
    auto v = ParseNumbers(args, text);
    if (v.size() != 1)
      Fail("tree spec '", text, "': auto takes at most one number, the largest verify batch");
    spec.auto_max_tokens = PositiveInt(v[0], "verify batch", text, inputs.max_tokens);
    if (spec.auto_max_tokens < 2)
      Fail("tree spec '", text, "': the verify batch counts the root, so it must be at least 2");
  } else if (kind == "opt") {
    spec.kind = TreeKind::kOpt;
    auto v = ParseNumbers(args, text);
    if (v.size() != 2) Fail("tree spec '", text, "': opt takes N,DELTA (e.g. opt:32,0.2)");
    spec.opt.n_nodes = PositiveInt(v[0], "node budget", text, max_nodes);
    spec.opt.delta = v[1];
    spec.opt.Validate();
  } else {
    Fail("tree spec '", text, "': unknown kind '", kind,
         "' (chain, kconfig, file, sequoia, opt, auto)");
  }
  return spec;
}

}  // namespace grove
