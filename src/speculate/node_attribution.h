// Which drafter proposed each node of a step's tree, told by a drafter made of several
// (speculate/drafter_mixture.h), and why those drafters took part in the step: the live view and
// the reports name them (issue 32). An optional capability of a Drafter (Drafter::attribution).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "speculate/token_tree.h"

namespace grove {

class NodeAttribution {
 public:
  virtual ~NodeAttribution() = default;

  // The drafters a node may come from; bit i of a node's mask stands for sources()[i].
  virtual std::span<const std::string> sources() const = 0;
  // For each node of `tree`, a tree of the last step (the one drafted, or a selection of its
  // nodes), the sources that proposed the node's token below its parent; 0 for a node none of
  // them proposed. Valid until the next step begins.
  virtual void NodeSources(const TokenTree& tree, std::vector<uint32_t>& masks) const = 0;
  // Why the last step's sources took part, in one line.
  virtual std::string Why() const = 0;

  // "draft-model+suffix" for a mask ("" for 0).
  std::string Names(uint32_t mask) const {
    std::string names;
    const std::span<const std::string> all = sources();
    for (std::size_t i = 0; i < all.size() && i < 32; ++i) {
      if ((mask >> i & 1u) == 0) continue;
      if (!names.empty()) names += '+';
      names += all[i];
    }
    return names;
  }
};

}  // namespace grove
