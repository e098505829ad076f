#include "speculate/step_cost.h"

#include <algorithm>

namespace grove {

double StepTokensPerSecond(double tokens, double draft_seconds, const VerifyCostCurve& verify_cost,
                           int32_t verified_tokens) {
  const int32_t n = std::clamp(verified_tokens, 1, verify_cost.max_size());
  return tokens / (draft_seconds + verify_cost.Seconds(n));
}

}  // namespace grove
