// The flags of the engine, registered here once each with one help text, for every command that
// takes them: the model (-m), the draft (--draft), threads (-t), where the models compute
// (--device, --draft-device) and how the KV cache keeps keys and values (--cache-type). A command
// says what the flag means there by a role, never by a help text of its own, so a flag reads the
// same in every command's --help.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "model/model.h"

namespace grove::cli {

// What -m names in a command.
enum class ModelRole {
  kTarget,          // the target; default: the bundled pair (with --pair)
  kRequiredTarget,  // the target, which must be given
  kModel,           // a model, which must be given
  kVocabulary,      // a model or vocabulary file, which must be given
};
void AddModelOption(CLI::App& cmd, std::string& model, ModelRole role);
// -m repeated: several models, one after another (grove bench).
void AddModelsOption(CLI::App& cmd, std::vector<std::string>& models);

// What --draft takes in a command.
enum class DraftRole {
  kDrafter,        // any drafter (DraftSource::Open); default: the bundled pair's mixture
  kDrafterOrNone,  // the same, or 'none' for no speculation
  kBundledModel,   // a draft model; default: the bundled pair's
  kModel,          // a draft model
};
CLI::Option* AddDraftOption(CLI::App& cmd, std::string& draft, DraftRole role);
// --draft repeated: drafters compared in one run (grove bench --spec).
void AddDraftsOption(CLI::App& cmd, std::vector<std::string>& drafts);

// -t: the threads of each forward; `whose` names them where the command has more than one kind.
void AddThreadsOption(CLI::App& cmd, int& threads, const std::string& whose = "");
// -t where a count must be given: at least 1.
void AddPositiveThreadsOption(CLI::App& cmd, int& threads, const std::string& whose = "");
// -t as a comma-separated list of thread counts, each measured (grove bench).
void AddThreadCountsOption(CLI::App& cmd, std::vector<int>& threads);

// -c: the context the KV cache holds, in tokens.
void AddContextOption(CLI::App& cmd, int32_t& n_ctx);
// --accept: an acceptance vector (grove calibrate) for sequoia trees and auto's first plans.
void AddAcceptOption(CLI::App& cmd, std::string& accept_file);

// --device and --draft-device: where the forward runs (model.h, ComputeDevice).
void AddDeviceOption(CLI::App& cmd, std::string& device);
void AddDraftDeviceOption(CLI::App& cmd, std::string& device);
// --cache-type: how the KV cache keeps keys and values (model/kv_cache.h).
void AddCacheTypeOption(CLI::App& cmd, std::string& type);

// "cpu", or "cuda" where the model runs on the GPU.
inline const char* DeviceName(const Model& model) {
  return model.device() == ComputeDevice::kCuda ? "cuda" : "cpu";
}

}  // namespace grove::cli
