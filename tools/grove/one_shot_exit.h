// How a one-shot command (grove run) ends its process once its work is done.
#pragma once

#include <initializer_list>

namespace grove {
class Model;
}

namespace grove::cli {

// Finishes what the models keep on disk (their packed weights, if still being written), flushes
// stdout and stderr, and exits with status 0 without running destructors: the kernel then takes
// back the models' mappings and buffers in one teardown. Destroying them took 2.5 ms of a 55 ms
// `grove run` of 128 tokens (issue 30): some forty munmaps, each a TLB shootdown while the
// thread pool's workers are alive, before the kernel's own teardown (2 ms) that every process
// pays. Call it only where nothing else is left to do or to keep: a speculative session's
// destructor, which keeps the measured verify curve, must have run. Null models are skipped.
[[noreturn]] void ExitLeavingModelsToKernel(std::initializer_list<const Model*> models);

}  // namespace grove::cli
