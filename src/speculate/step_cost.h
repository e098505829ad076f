// The cost model every choice of tree is made with (Sequoia §4.1, sequoia.h; draft_outlook.h): a
// speculative step costs its drafting plus one verify forward of its n tokens, t(n) from the
// measured curve, and yields its tokens over that time. `grove bench --spec` predicts each row's
// speed with it from what the row measured, so a prediction that misses says the model misses.
#pragma once

#include <cstdint>

#include "speculate/sequoia.h"

namespace grove {

// tokens / (draft_seconds + t(n)), n clamped to the curve's measured sizes [1, max_size()].
double StepTokensPerSecond(double tokens, double draft_seconds, const VerifyCostCurve& verify_cost,
                           int32_t verified_tokens);

}  // namespace grove
