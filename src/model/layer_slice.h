// A draft model cut from a target: its first n transformer blocks with the target's embeddings,
// final norm, output head and tokenizer. Shares the vocabulary by construction and agrees with the
// target often enough to be a useful drafter when nothing smaller is at hand (e.g. stories260K).
#pragma once

#include <string>

#include "io/gguf.h"
#include "io/gguf_writer.h"

namespace grove {

// Describes the sliced model; tensor bytes are copied from `source` while writing, so `source` must
// outlive the writer. Throws grove::Error if n_layers is not in [1, block_count].
GgufWriter LayerSliceWriter(const GgufFile& source, int32_t n_layers);

}  // namespace grove
