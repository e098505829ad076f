// A drafter that reads the target's hidden states (a feature or parallel drafter,
// speculate/feature_drafter.h): an optional capability of a Drafter (Drafter::feature_reader).
// The session hands it the target's pre-norm hidden state (Model::hidden_states) of committed
// positions, in order: the prompt's after Begin, and before each Commit those of the root and the
// accepted nodes.
#pragma once

#include <cstdint>
#include <span>

namespace grove {

class TargetFeatureReader {
 public:
  virtual ~TargetFeatureReader() = default;
  // The features of positions first_position onward, n_embd floats a row.
  virtual void ObserveTarget(int32_t first_position, std::span<const float> rows) = 0;
  // After Begin: the positions [0, n) whose features the reader still holds from before (a context
  // that shares them with the last one, Drafter::ReuseCache); the target prefill may skip them
  // and hand over the features from n on. 0 after a cold Begin.
  virtual int32_t ObservedPrefix() const = 0;
};

}  // namespace grove
