// A whole GGUF model rewritten with its weight matrices in another type (`grove quantize`).
//
// Metadata is copied unchanged except general.file_type (and general.quantization_version, which
// the GGUF spec requires once any tensor is quantized). Matrices are converted row by row,
// dequantize then quantize, while the output is written, so memory holds one tensor's worth of rows
// at most beside the mapped input. 1-D tensors (norms) are stored as f32: they are tiny and every
// engine reads them so.
//
// Rows whose length is not a multiple of the target's block size cannot be stored in it; like
// llama-quantize, such a tensor falls back (with a warning naming it) to the first of q8_0, f16,
// f32 whose block fits (quant_mix.h). Targets "q2_k", "q3_k_s/m/l", "q4_k_s/m", "q5_k_s/m",
// "iq4_nl" and "iq4_xs" are llama.cpp's presets (mixes): the base type with more bits for the
// output matrix and for attn_v, ffn_down and attn_output where llama.cpp gives them more, chosen
// as llama-quantize does without an importance matrix; "mxfp4_moe" stores a mixture's experts
// (3-D tensors) in MXFP4 and every other matrix in q8_0, as llama-quantize's MXFP4_MOE. The other
// targets store every matrix in one type (llama-quantize --pure).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "base/thread_pool.h"
#include "io/gguf.h"
#include "quant/quant_mix.h"

namespace grove {

// A target type: one type for every matrix, or a mix rule on top of a base type.
struct QuantTarget {
  std::string name;    // as the user may write it, lower case
  GgmlType base;       // type of most matrices
  uint32_t file_type;  // llama.cpp's LLAMA_FTYPE_* for general.file_type
  QuantMix mix = QuantMix::kNone;
};

// The target named `name` (any case). Throws grove::Error naming the types grove writes.
const QuantTarget& ParseQuantTarget(std::string name);

struct QuantizeFileReport {
  uint64_t in_bytes = 0;  // of the input's tensors
  std::size_t tensors = 0;
};

// Writes `in` to `out` (a temporary file beside it, renamed into place) with its matrices in
// `target`, rows split across the pool's threads. Every tensor's type is decided, and every problem
// reported (grove::Error naming the tensor), before anything is written. on_tensor(src, type) is
// called once each tensor is written, progress(done, total) as GgufWriter::WriteFile calls it;
// warnings (fallback types, a requantized input) go to the log.
QuantizeFileReport QuantizeFile(
    const GgufFile& in, const std::string& out, const QuantTarget& target, ThreadPool& pool,
    const std::function<void(const GgufTensor& src, GgmlType type)>& on_tensor = {},
    const std::function<void(std::size_t done, std::size_t total)>& progress = {});

}  // namespace grove
