// --device, as every command that loads a model for decoding registers it: where the forward runs
// (model.h, ComputeDevice), said once.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "model/model.h"

namespace grove::cli {

inline void AddDeviceOption(CLI::App& cmd, std::string& device) {
  cmd.add_option("--device", device,
                 "Where the models compute: cpu, cuda (an NVIDIA GPU: weights, KV cache and the "
                 "whole step there) or auto (the GPU when one is present and takes the model, "
                 "else the CPU)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
}

// --draft-device: where a draft model computes.
inline void AddDraftDeviceOption(CLI::App& cmd, std::string& device) {
  cmd.add_option("--draft-device", device,
                 "Where a draft model computes: cpu, cuda or auto (where the target does; a draft "
                 "too small to fill a GPU can be faster on the CPU, docs/cuda.md)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
}

// "cpu", or "cuda" where the model runs on the GPU.
inline const char* DeviceName(const Model& model) {
  return model.device() == ComputeDevice::kCuda ? "cuda" : "cpu";
}

}  // namespace grove::cli
