// --cache-type, as the commands that decode register it: how the KV cache keeps keys and values
// (model/kv_cache.h), said once.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace grove::cli {

inline void AddCacheTypeOption(CLI::App& cmd, std::string& type) {
  cmd.add_option("--cache-type", type,
                 "KV cache element type: f32, or f16 (half the memory and what attention reads "
                 "at long contexts; llama.cpp's default). A draft model's follows the target's; "
                 "the GPU keeps f32")
      ->check(CLI::IsMember({"f32", "f16"}))
      ->capture_default_str();
}

}  // namespace grove::cli
