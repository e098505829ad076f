// What a drafter that looks its rows up in text (speculate/suffix_drafter.h) says about each row:
// how long the match it continued was. A continuation found after a long match copies a passage;
// after a short one, a phrase that may go on differently (a mixture prices the two apart,
// speculate/drafter_mixture.h). An optional capability of a Drafter (Drafter::lookup_matches).
#pragma once

#include <cstdint>
#include <span>

namespace grove {

class LookupMatches {
 public:
  virtual ~LookupMatches() = default;
  // For each row of the last Expand, how many tokens of the text before the node its lookup
  // matched (0: none). Empty before any Expand.
  virtual std::span<const int32_t> matched_lengths() const = 0;
};

}  // namespace grove
