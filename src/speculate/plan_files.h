// The files tree plans are made from, each read and written here so that writer and reader agree
// on one format: static tree shapes (`grove tree --out`, `--spec file:PATH`), acceptance vectors
// (`grove calibrate`, `--accept`) and verify-cost profiles (`grove bench --verify-curve
// --profile-out`, `--profile`; docs/profile-format.md). A writer replaces its file only once the
// whole of it is written (base/replacing_file.h): a plan never reads half a file.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sample/sampler.h"
#include "speculate/token_tree.h"
#include "speculate/tree_plan.h"

namespace grove {

// Static shapes: {"parents": [...]} with nodes in level order (-1: child of the root); more than
// max_nodes nodes are refused before a tree is built.
TokenTree ReadTreeFile(const std::string& path,
                       int32_t max_nodes = std::numeric_limits<int32_t>::max());
void WriteTreeFile(const std::string& path, const TokenTree& shape);

// Acceptance vectors: {"acceptance": [p_1, ...], "draft_seconds_per_level": c, ...}; c is 0 when
// absent.
struct AcceptanceFile {
  std::vector<double> acceptance;
  double draft_seconds_per_level = 0.0;
};
// How a vector was measured: written beside it for the reader (grove reads the two fields above).
struct AcceptanceProvenance {
  double none = 0.0;  // the share of steps that accepted no child
  int32_t width = 0;  // children of the star tree measured
  SamplerParams sampling;
  int64_t steps = 0;
  int64_t prompts = 0;
  std::string target, draft, method;
};
AcceptanceFile ReadAcceptanceFile(const std::string& path);
void WriteAcceptanceFile(const std::string& path, const AcceptanceFile& file,
                         const AcceptanceProvenance& provenance);

// Verify-cost profiles; the curve's n counts the verified tokens (root included).
struct VerifyProfilePoint {
  int32_t n = 0;
  double seconds_median = 0.0, seconds_sd = 0.0, seconds_min = 0.0, seconds_max = 0.0;
};
// What a profile says besides the curve (the kernels, the CPU and the time are added when written).
struct VerifyProfile {
  std::string model, model_path, model_types;
  uint64_t model_size_bytes = 0;
  uint64_t weight_bytes = 0;  // read per forward: with t(1), the decode bandwidth achieved
  int32_t threads = 0;
  int32_t prefix_tokens = 0;
  int32_t repetitions = 0;
  std::vector<VerifyProfilePoint> curve;  // n increasing from 1
  std::optional<double> bandwidth_gbps;   // the machine's, measured beside it
};
VerifyCostCurve ReadVerifyProfile(const std::string& path);
void WriteVerifyProfile(const std::string& path, const VerifyProfile& profile);

// The inputs of a plan from the files users pass (--accept, --profile; empty: absent).
TreePlanInputs ReadPlanInputs(const std::string& accept_path, const std::string& profile_path,
                              int32_t max_tokens);

}  // namespace grove
