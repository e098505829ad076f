// Shared fixtures: where ../shared lives, temporary files, and small random models.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/gguf_writer.h"

#include "kernels/kernel_set.h"
#include "model/model.h"
#include "model/random_model.h"
#include "speculate/session.h"

namespace grove::testing {

// Path of a file under the shared data directory (../shared beside the checkout, or
// $GROVE_SHARED_DIR).
std::string SharedPath(const std::string& relative);
bool FileExists(const std::string& path);
// Whether a temporary of a file being written to `path` (`path.XXXXXX.partial`,
// base/replacing_file.h) is left in its directory.
bool PartialFileLeft(const std::string& path);

// A fresh path in the test's temporary directory; whatever is there (file or directory) is
// removed when the test binary exits.
std::string TempPath(const std::string& name);
// `name` with every character gtest refuses in a test name ('-', ':', ',', '.') turned to '_'.
std::string TestNameOf(std::string name);

// A TempPath made a directory now (removed, with what it holds, when the test binary exits).
std::string TempDirectory(const std::string& name);

// The bytes of the file at `path`; "" when it cannot be read.
std::string ReadWholeFile(const std::string& path);

// What a shell command did: its exit status (-1 when it did not exit) and what it wrote.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `command` through the shell, its stdout and stderr written to the files `out` and `err`.
CommandResult RunShellCommand(const std::string& command, const std::string& out,
                              const std::string& err);

// Writes a random model of the given spec to a temporary file and loads it.
std::unique_ptr<Model> MakeRandomModel(const RandomModelSpec& spec,
                                       const ModelOptions& options = {});

// Reads the first `split` of `tokens` into a sequence of `model` acquired for it, forks it there,
// and continues parent and child with the rest: whether the child's logits equal the parent's
// (a fork copies what the child needs, whatever the cache keeps).
bool ForkContinuesAsParent(Model& model, std::span<const int32_t> tokens, int32_t split);

// Writes a random model of `spec` to `path` as a file that is not what it says: its architecture,
// and the prefix of its architecture's keys, renamed to new_arch, then `edit` applied to the
// metadata (relabelled files, wrong head counts, ...).
void WriteRelabelledModel(const RandomModelSpec& spec, const std::string& new_arch,
                          const std::string& path,
                          const std::function<void(GgufWriter&)>& edit = {});

// Writes a random model of `spec` to `path` with the matrix `tensor` stored as `type` (zeroed
// blocks): a file holding a type grove reads or names but does not compute with.
void WriteModelWithTensorType(const RandomModelSpec& spec, const std::string& path,
                              const std::string& tensor, GgmlType type);

// Every kernel level this CPU runs (kernels/kernel_set.h), scalar first.
std::vector<const KernelSet*> AvailableKernelLevels();

// n floats from N(0, scale^2), deterministic for a seed.
std::vector<float> RandomNormal(std::size_t n, uint32_t seed, float scale);

// A small spec that exercises grouped-query attention, RoPE on part of the head, and every matrix;
// widths are multiples of 32 so quantized types work.
RandomModelSpec TinySpec(GgmlType type = GgmlType::kF32, uint64_t seed = 7);

// One step of a started session driven alone, as Generate does (its caller keeps `batch`, so that
// a test can reserve it): draft, verify the tree in one target forward, accept. Returns the
// accepted tokens.
std::span<const int32_t> StepAlone(SpeculativeSession& session, Model& target, Batch& batch);

// Sequences under one policy, each with its own drafter, options (their target_seq differ) and
// prompt, decoded each alone (SpeculativeSession::Generate) and then together as a scheduler does:
// each step every unfinished one drafts and appends its tree to one batch, one target forward
// verifies them all. Returns each sequence's tokens both ways.
struct AloneAndTogether {
  std::vector<std::vector<int32_t>> alone;
  std::vector<std::vector<int32_t>> together;
};
AloneAndTogether DecodeAloneAndTogether(Model& target, std::span<Drafter* const> drafters,
                                        const SpeculationPolicy& policy,
                                        std::span<const SessionOptions> options,
                                        std::span<const std::vector<int32_t>> prompts);

}  // namespace grove::testing

#define GROVE_SKIP_IF_MISSING(path)                                                        \
  do {                                                                                     \
    if (!::grove::testing::FileExists(path)) {                                             \
      GTEST_SKIP() << "test data not found: " << (path)                                    \
                   << " (tests read ../shared beside the checkout; set GROVE_SHARED_DIR)"; \
    }                                                                                      \
  } while (0)
