// A drafter by the name users give it: "ngram" for prompt lookup, or the path of a draft GGUF (same
// vocabulary as the target). A draft model shares the target's thread pool, so its forwards and
// the target's never have two sets of workers competing for the cores, and the target's context.
#pragma once

#include <memory>
#include <string>

#include "model/model.h"
#include "speculate/drafter.h"

namespace grove {

struct OpenedDrafter {
  std::unique_ptr<Model> model;  // the draft model; null for prompt lookup
  std::unique_ptr<Drafter> drafter;
};

// Throws grove::Error naming the problem (a file that does not load, another vocabulary).
OpenedDrafter OpenDrafter(const std::string& name, Model& target);

}  // namespace grove
