// --device and --cache-type, as the commands that load a model for decoding register them: where
// the forward runs (model.h, ComputeDevice) and how its KV cache keeps keys and values, said once.
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

// --cache-type: how the KV cache keeps keys and values (model/kv_cache.h).
inline void AddCacheTypeOption(CLI::App& cmd, std::string& type) {
  cmd.add_option("--cache-type", type,
                 "KV cache element type: f32, or f16 (half the memory and what attention reads "
                 "at long contexts; llama.cpp's default). A draft model's follows the target's; "
                 "the GPU keeps f32")
      ->check(CLI::IsMember({"f32", "f16"}))
      ->capture_default_str();
}

// "cpu", or "cuda" where the model runs on the GPU.
inline const char* DeviceName(const Model& model) {
  return model.device() == ComputeDevice::kCuda ? "cuda" : "cpu";
}

}  // namespace grove::cli
