#include "llama_cpp_reference.h"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "quant/quant.h"
#include "test_support.h"

namespace grove::testing {
namespace {

// Runs tests/reference/<script> with `request` as its JSON input (files named after `files` in the
// temporary directory) and returns its JSON output; a failed run fails naming `failed` and what
// the script wrote to stderr.
nlohmann::json RunReferenceScript(const std::string& script, const nlohmann::json& request,
                                  const std::string& files, const std::string& failed) {
  const std::string in = TempPath(files + "_request.json");
  const std::string out = TempPath(files + "_result.json");
  const std::string err = TempPath(files + "_stderr.txt");
  std::ofstream(in) << request.dump();
  const std::string command =
      "node " + ReferenceDir() + "/" + script + " < " + in + " > " + out + " 2> " + err;
  const int status = std::system(command.c_str());
  if (status != 0) {
    std::ostringstream message;
    message << std::ifstream(err).rdbuf();
    Fail(failed, " (status ", status, "): ", message.str());
  }
  return nlohmann::json::parse(std::ifstream(out));
}

}  // namespace

std::string ReferenceDir() { return GROVE_REFERENCE_DIR; }

ReferenceTokenization RunReferenceTokenizers(const std::string& gguf, const std::string& hf_package,
                                             const std::vector<std::string>& strings) {
  nlohmann::json request = {{"gguf", gguf}, {"strings", strings}};
  request["hf"] = hf_package.empty() ? nlohmann::json() : nlohmann::json(hf_package);
  const nlohmann::json result = RunReferenceScript(
      "tokenize.mjs", request, "tokenize", "the reference tokenizers failed on '" + gguf + "'");
  ReferenceTokenization t;
  t.llama_cpp_plain = result["llama_cpp"]["plain"].get<std::vector<std::vector<int32_t>>>();
  t.llama_cpp_special = result["llama_cpp"]["special"].get<std::vector<std::vector<int32_t>>>();
  if (!result["hf"].is_null())
    t.hugging_face = result["hf"].get<std::vector<std::vector<int32_t>>>();
  return t;
}

std::optional<std::string> LlamaCppUnavailable() {
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    return "node is not installed (scripts/install-deps.sh installs it): llama.cpp reference "
           "checks skipped";
  }
  const std::string package =
      ReferenceDir() + "/node_modules/@node-llama-cpp/linux-x64/package.json";
  if (!FileExists(package)) {
    return "node-llama-cpp is not installed in " + ReferenceDir() +
           " (scripts/install-deps.sh installs it): llama.cpp reference checks skipped";
  }
  return std::nullopt;
}

LlamaCppResult RunLlamaCpp(const LlamaCppRequest& r) {
  nlohmann::json request = {{"model", r.model},
                            {"tokens", r.tokens},
                            {"context", r.context},
                            {"threads", r.threads},
                            {"kv_type", r.kv_type}};
  if (r.greedy_n > 0) request["greedy"] = {{"prompt", r.greedy_prompt}, {"n", r.greedy_n}};
  const nlohmann::json result = RunReferenceScript("llama_cpp_logits.mjs", request, "llama_cpp",
                                                   "llama.cpp failed on '" + r.model + "'");
  LlamaCppResult parsed;
  if (result.contains("logits"))
    parsed.logits = result["logits"].get<std::vector<std::vector<float>>>();
  if (result.contains("greedy")) {
    parsed.greedy = result["greedy"].get<std::vector<int32_t>>();
    parsed.margins = result["margins"].get<std::vector<float>>();
  }
  return parsed;
}

void WriteDequantizedCopy(const std::string& src, const std::string& dst) {
  auto file = GgufFile::Open(src);
  GgufWriter w(file->alignment());
  for (const auto& [key, value] : file->metadata()) w.SetValue(key, value);
  for (const GgufTensor& t : file->tensors()) {
    const GgufTensor* tensor = &t;
    w.AddTensor(t.name, t.shape, GgmlType::kF32, [tensor](std::span<uint8_t> out) {
      const int64_t n_in = tensor->shape[0];
      const int64_t rows = tensor->n_elements() / n_in;
      for (int64_t r = 0; r < rows; ++r) {
        DequantizeRow(tensor->type, tensor->data + r * GgmlRowBytes(tensor->type, n_in),
                      reinterpret_cast<float*>(out.data()) + r * n_in, n_in);
      }
    });
  }
  w.WriteFile(dst);
}

RandomModelSpec FamilyTestSpec(const std::string& arch, GgmlType type, uint64_t seed) {
  RandomModelSpec s;
  // Not "phi3": llama.cpp expects Phi-3's special tokens in a vocabulary of a model so named.
  s.name = "test-" + (arch == "phi3" ? std::string("phi") : arch);
  s.arch = arch;
  s.n_vocab = 512;
  s.n_embd = 128;
  s.n_layer = 3;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 256;
  s.n_ctx = 256;
  s.type = type;
  s.seed = seed;
  // Measured: gains of 1.5 and 0.25 make greedy text of 32 tokens hold 13 to 30 distinct tokens
  // in every family; gain 1 and embeddings of gain 1 gave 2 or 3 (one token repeated).
  s.matrix_gain = 1.5f;
  s.embedding_gain = 0.25f;
  const float logit_std = 4.0f;
  if (arch == "llama") {
    s.rope_freq_factors = true;  // Llama 3.1's per-frequency divisors
  } else if (arch == "qwen2") {
    s.tied_output = true;  // as Qwen2.5-0.5B
    s.rope_freq_base = 1e6f;
  } else if (arch == "qwen3") {
    s.head_dim = 64;  // q_dim 256 != n_embd, as in real Qwen3 files
    s.tied_output = true;
    s.rope_freq_base = 1e6f;
  } else if (arch == "qwen3moe") {
    // Qwen3's attention over 8 experts of 64, 2 used per token (Qwen3-30B-A3B: 128 of 768, 8
    // used), so that 72 positions route through every expert and many pairs of them.
    s.head_dim = 64;
    s.rope_freq_base = 1e6f;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_ff_expert = 64;
  } else if (arch == "gemma3") {
    // Six layers: five local, then a global one (the default pattern); a window of 16 tokens
    // that a 64-token sequence crosses; scaled rope on the global layer only.
    s.n_layer = 6;
    s.head_dim = 64;
    s.n_head_kv = 1;
    s.tied_output = true;
    s.rope_freq_base = 1e6f;
    s.rope_scale = 8.0f;
    s.sliding_window = 16;
    s.rms_eps = 1e-6f;
  } else if (arch == "phi3") {
    // Phi-4-mini's kind: fused QKV and gate-up, LongRoPE factors, 3/4 of each head rotating, and
    // a window the model does not apply.
    s.n_rot = 24;
    s.longrope_orig_ctx = 256;
    s.n_ctx = 1024;
    s.tied_output = true;
    s.sliding_window = 48;
  } else if (arch == "qwen35" || arch == "qwen35moe") {
    // Qwen3.5's kind: three Gated DeltaNet layers, then a gated attention layer, twice; a quarter
    // of each head rotating; two key heads shared by four value heads of 32. Its mixture
    // (qwen35moe): 8 experts of 64, 2 used per token (Qwen3.5-35B-A3B: 256 of 512, 8 used), and
    // a shared expert n_ff wide (512 there).
    if (arch == "qwen35moe") s.n_expert = 8, s.n_expert_used = 2, s.n_ff_expert = 64;
    s.n_layer = 8;
    s.head_dim = 64;
    s.n_rot = 16;
    s.tied_output = true;
    s.rope_freq_base = 1e7f;
    s.rms_eps = 1e-6f;
    s.ssm_state = 32;
    s.ssm_groups = 2;
    s.ssm_v_heads = 4;
  } else if (arch == "gpt-oss") {
    // gpt-oss-20b's kind: heads of 64 (q_dim 256 != n_embd, as 4096 != 2880 there), four layers
    // alternating a window of 16 (the even ones) and the whole context, YaRN 4x from an original
    // context of 64 that the 72 positions exceed; 8 experts of 64, 2 used (32 of 2880, 4 used
    // there); biases and sinks everywhere the family has them.
    s.n_layer = 4;
    s.head_dim = 64;
    s.rope_freq_base = 150000.0f;
    s.rope_scale = 4.0f;
    s.yarn_orig_ctx = 64;
    s.sliding_window = 16;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_ff_expert = 64;
  } else {
    Fail("FamilyTestSpec: unknown architecture '", arch, "'");
  }
  // Logits of standard deviation about logit_std: norm(h) . w has variance gain^2 for an output row
  // w of variance gain^2 / n_embd (the embedding's gain when tied).
  s.output_norm_gain = logit_std / (s.tied_output ? s.embedding_gain : s.matrix_gain);
  return s;
}

RandomModelSpec FamilyDraftSpec(const std::string& arch, GgmlType type, uint64_t seed) {
  RandomModelSpec s = FamilyTestSpec(arch, type, seed);
  s.name = "draft-" + (arch == "phi3" ? std::string("phi") : arch);
  s.n_layer = arch == "gemma3" ? 2 : 1;
  s.n_embd = 64;
  s.n_ff = 128;
  if (arch == "phi3") s.n_rot = 12;
  if (arch == "qwen3moe" || arch == "qwen35moe" || arch == "gpt-oss") s.n_ff_expert = 32;
  if (arch == "gpt-oss") s.n_layer = 2;  // a local layer and a global one
  return s;
}

}  // namespace grove::testing
