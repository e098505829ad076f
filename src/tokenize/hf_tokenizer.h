// A Hugging Face tokenizer (tokenizer.json, with tokenizer_config.json beside it) as the GGUF
// vocabulary keys llama.cpp's converter writes, so that a user with only the Hugging Face files
// can run grove (and llama.cpp) on them: `grove convert-tokenizer`.
//
// Two kinds of tokenizer.json are converted, the two that the families grove runs use:
//   - byte-level BPE (a ByteLevel pre-tokenizer or decoder: GPT-2, Llama 3, Qwen, DeepSeek, Phi-4)
//     -> tokenizer.ggml.model "gpt2": tokens, merges, token types, and tokenizer.ggml.pre named
//     from the file's split pattern (the table below; `pre` overrides it);
//   - SentencePiece-style BPE with byte fallback (Gemma, Llama 2, Phi-3, Mistral v1)
//     -> "llama": tokens with their U+2581 spaces, and scores. tokenizer.json has no scores, only
//     merges, so a token's score is minus the rank of the merge that makes it (the sentencepiece
//     files they were converted from order pieces the same way): merging by highest score is then
//     merging by lowest rank, as the Hugging Face tokenizer does. Tokens no merge makes score
//     lower than any merge.
// Anything else (Unigram, WordPiece) is refused, naming the model type.
//
// Token types: added tokens marked special are control tokens, other added tokens user-defined
// (except, in a SentencePiece vocab, those spelled with U+2581: see hf_tokenizer.cc). As
// llama.cpp does, added tokens that look like control markers, <|...|> or <｜...｜>, are control
// tokens too. <0xXX> tokens of a byte-fallback vocab are byte tokens, the unknown token
// is unknown, and the rest are normal. Ids no token uses are filled with "[PAD<id>]", unused.
//
// From tokenizer_config.json: bos/eos/unk/pad tokens (as strings or {"content": ...} objects),
// add_bos_token / add_eos_token, and chat_template (a string, or the list form's "default").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace grove {

class GgufWriter;

struct HfTokenizerOptions {
  std::string pre;   // tokenizer.ggml.pre for byte-level BPE; empty: named from the split pattern
  std::string name;  // general.name; empty: none
};

struct HfTokenizerSummary {
  std::string model;  // "gpt2" or "llama"
  std::string pre;    // for "gpt2"
  int32_t n_tokens = 0;
  int32_t n_merges = 0;
  int32_t n_added = 0;
  bool has_chat_template = false;
  std::vector<std::string> notes;  // what was read but not carried over, for the user to see
};

// Sets the tokenizer.* keys (and general.architecture "llama" with small placeholder
// hyperparameters, so that llama.cpp loads the file as a vocabulary) on `writer`. `config_json`
// may be empty. Throws grove::Error naming the file and field that cannot be converted.
HfTokenizerSummary ConvertHfTokenizer(std::string_view tokenizer_json, std::string_view config_json,
                                      const HfTokenizerOptions& options, GgufWriter* writer);

}  // namespace grove
