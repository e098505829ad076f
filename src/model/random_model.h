// Random-weight Llama models of a named shape, written as GGUF. Benchmarks of real shapes
// (TinyLlama-1.1B, a 68M draft) and tests need models that anyone can reproduce without downloads.
// The vocabulary is synthetic but complete (byte fallback tokens plus pieces built so every
// SentencePiece merge has its parts), so any prompt tokenizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/ggml_type.h"
#include "io/gguf_writer.h"

namespace grove {

struct RandomModelSpec {
  std::string name = "random";
  int32_t n_vocab = 512;
  int32_t n_embd = 64;
  int32_t n_layer = 2;
  int32_t n_head = 4;
  int32_t n_head_kv = 2;
  int32_t n_ff = 160;
  int32_t n_ctx = 2048;
  float rope_freq_base = 10000.0f;
  GgmlType type = GgmlType::kF32;  // of the weight matrices; norms are always f32
  bool tied_output = false;
  bool with_vocab = true;  // false: no tokenizer (any n_vocab, e.g. 8 for exact-distribution tests)
  uint64_t seed = 1;
};

// Shapes by name: "tinyllama-1.1b" (2048 wide, 22 layers, 32/4 heads, FFN 5632, vocab 32000),
// "draft-68m" (768 wide, 2 layers, 12 heads, FFN 3072, vocab 32000), "llama-60m" (768 wide, 8
// layers, 12/4 heads, FFN 2048, vocab 4096: 57M parameters, most of them in the layers, so its
// Q8_0 weights exceed the last-level cache and a forward is bound by memory; sliced to one layer it
// gives its own draft), "tiny" (for tests).
std::optional<RandomModelSpec> NamedModelShape(std::string_view name);
std::vector<std::string> NamedModelShapes();

// Describes the model; tensors are generated (deterministically from spec.seed) while writing.
GgufWriter RandomModelWriter(const RandomModelSpec& spec);

}  // namespace grove
