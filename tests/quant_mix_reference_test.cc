// The quantization mixes against llama.cpp itself: llama_model_quantize of node-llama-cpp's
// libllama (the function llama-quantize calls, whose llama_tensor_get_type picks each matrix's
// type), opened at test time like ggml_reference.h's libggml-base, quantizes random f32 models of
// three families for every preset grove writes with a mix; every tensor of its output must have
// the type MixTensorType and FallbackType give it. The models have layers enough for every rule
// to choose differently somewhere (16 layers: the first and last eighth, every third between, the
// first sixteenth, the first two and four; 12 with a tied embedding and one query head per KV
// head; 8 with Phi-3's fused QKV), and rows of 256 so that the mixes' choices show, not their
// fallbacks; FallbackType is checked by quant_test.
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/ggml_type.h"
#include "io/gguf.h"
#include "llama_cpp_reference.h"
#include "model/random_model.h"
#include "quant/quant_mix.h"
#include "test_support.h"

namespace grove {
namespace {

// llama_model_quantize_params of llama.h: its first two fields (nthread, ftype) have kept their
// places since the struct was made; the rest keep llama_model_quantize_default_params' values.
// Returned by value through a buffer larger than the struct.
struct QuantizeParams {
  int32_t nthread;
  int32_t ftype;
  unsigned char rest[248];
};

class LlamaQuantize {
 public:
  static const LlamaQuantize& Get() {
    static const LlamaQuantize* const lib = new LlamaQuantize();
    return *lib;
  }
  const std::optional<std::string>& unavailable() const { return unavailable_; }
  bool missing() const { return missing_; }

  // Quantizes `in` to `out` with llama.cpp's LLAMA_FTYPE `ftype`; false if llama.cpp refused.
  bool Quantize(const std::string& in, const std::string& out, int32_t ftype) const {
    QuantizeParams params = default_params_();
    params.ftype = ftype;
    return quantize_(in.c_str(), out.c_str(), &params) == 0;
  }

 private:
  LlamaQuantize() {
#if defined(__linux__) && defined(__x86_64__)
    const std::string path = testing::ReferenceDir() +
                             "/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/"
                             "libllama.v0.5.0.so";
#else
    const std::string path;
#endif
    if (path.empty() || !testing::FileExists(path)) {
      missing_ = true;
      unavailable_ =
          "libllama of node-llama-cpp is not installed (scripts/install-deps.sh): " + path +
          ": llama.cpp's quantization mixes not compared";
      return;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = dlerror();
      unavailable_ = "dlopen(" + path + ") failed: " + (error ? error : "unknown error");
      return;
    }
    default_params_ = reinterpret_cast<QuantizeParams (*)()>(
        dlsym(handle, "llama_model_quantize_default_params"));
    quantize_ = reinterpret_cast<uint32_t (*)(const char*, const char*, const QuantizeParams*)>(
        dlsym(handle, "llama_model_quantize"));
    auto log_set = reinterpret_cast<void (*)(void (*)(int, const char*, void*), void*)>(
        dlsym(handle, "llama_log_set"));
    if (default_params_ == nullptr || quantize_ == nullptr || log_set == nullptr) {
      unavailable_ = path + " lacks llama_model_quantize, its default params or llama_log_set";
      return;
    }
    // The defaults this reading of the struct expects: every thread, and LLAMA_FTYPE_MOSTLY_Q8_0.
    const QuantizeParams defaults = default_params_();
    if (defaults.nthread != 0 || defaults.ftype != 7) {
      unavailable_ = "llama_model_quantize_params is not laid out as this test reads it";
      return;
    }
    log_set([](int, const char*, void*) {}, nullptr);  // it logs every tensor
  }

  std::optional<std::string> unavailable_;
  bool missing_ = false;
  QuantizeParams (*default_params_)() = nullptr;
  uint32_t (*quantize_)(const char*, const char*, const QuantizeParams*) = nullptr;
};

// A `grove quantize` TYPE with a mix, as tools/grove/cmd_quantize.cc names them, and llama.cpp's
// LLAMA_FTYPE of the same preset (llama.h).
struct Preset {
  const char* name;
  int32_t ftype;
  QuantMix mix;
  GgmlType base;
};
constexpr Preset kPresets[] = {
    {"q2_k", 10, QuantMix::kQ2_K, GgmlType::kQ2_K},
    {"q3_k_s", 11, QuantMix::kQ3_K_S, GgmlType::kQ3_K},
    {"q3_k_m", 12, QuantMix::kQ3_K_M, GgmlType::kQ3_K},
    {"q3_k_l", 13, QuantMix::kQ3_K_L, GgmlType::kQ3_K},
    {"q4_k_s", 14, QuantMix::kQ4_K_S, GgmlType::kQ4_K},
    {"q4_k_m", 15, QuantMix::kQ4_K_M, GgmlType::kQ4_K},
    {"q5_k_s", 16, QuantMix::kQ5_K_S, GgmlType::kQ5_K},
    {"q5_k_m", 17, QuantMix::kQ5_K_M, GgmlType::kQ5_K},
    {"q6_k", 18, QuantMix::kNone, GgmlType::kQ6_K},
    {"iq4_nl", 25, QuantMix::kIQ4, GgmlType::kIQ4_NL},
    {"iq4_xs", 30, QuantMix::kIQ4, GgmlType::kIQ4_XS},
    {"mxfp4_moe", 38, QuantMix::kMXFP4_MoE, GgmlType::kMXFP4},
};

struct MixCase {
  const char* arch;
  int32_t n_layer;
  int32_t n_head_kv;  // of 4 query heads
  bool tied_output;
  // A mixture's experts (qwen3moe): 4, below the 8 at which llama.cpp's rules for Mixtral-like
  // models start, which grove does not apply yet (quant_mix.cc).
  int32_t n_expert = 0;
};

RandomModelSpec SpecOf(const MixCase& c) {
  RandomModelSpec s = testing::FamilyTestSpec(c.arch, GgmlType::kF32);
  s.n_embd = 256;
  s.n_ff = 256;
  s.n_layer = c.n_layer;
  s.n_head = 4;
  s.n_head_kv = c.n_head_kv;
  s.head_dim = 0;
  s.tied_output = c.tied_output;
  if (c.n_expert > 0) {
    s.n_expert = c.n_expert;
    s.n_expert_used = 2;
    s.n_ff_expert = 256;
  }
  return s;
}

bool IsRouter(const std::string& name) {
  const std::string suffix = ".ffn_gate_inp.weight";
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class QuantMixVsLlamaCpp : public ::testing::TestWithParam<MixCase> {};

TEST_P(QuantMixVsLlamaCpp, EveryTensorOfEveryPresetHasLlamaCppsType) {
  const LlamaQuantize& llama = LlamaQuantize::Get();
  if (llama.unavailable()) {
    if (llama.missing()) GTEST_SKIP() << *llama.unavailable();
    GTEST_FAIL() << *llama.unavailable();
  }
  const MixCase& c = GetParam();
  const RandomModelSpec spec = SpecOf(c);
  const std::string in = testing::TempPath(std::string("mix-") + c.arch + ".f32.gguf");
  RandomModelWriter(spec).WriteFile(in);
  const MixModel model{
      .n_layer = c.n_layer, .has_output = !c.tied_output, .n_gqa = spec.n_head / spec.n_head_kv};
  for (const Preset& preset : kPresets) {
    SCOPED_TRACE(preset.name);
    const std::string out = testing::TempPath(std::string("mix-") + c.arch + "." + preset.name);
    ASSERT_TRUE(llama.Quantize(in, out, preset.ftype));
    const auto file = GgufFile::Open(out);
    int matrices = 0;
    for (const GgufTensor& t : file->tensors()) {
      GgmlType expected = GgmlType::kF32;  // 1-D: norms and biases stay f32
      if (t.shape.size() >= 2 && IsRouter(t.name)) {
        expected = GgmlType::kF32;  // a mixture's router keeps its type (f32 here)
      } else if (t.shape.size() >= 2) {
        const int64_t n_matrices = t.shape.size() > 2 ? t.shape[2] : 1;
        expected = FallbackType(MixTensorType(preset.mix, preset.base, t.name, n_matrices, model),
                                t.shape[0]);
        ++matrices;
      }
      EXPECT_EQ(GgmlTypeName(t.type), GgmlTypeName(expected)) << t.name;
    }
    EXPECT_GE(matrices, 4 * c.n_layer);
    std::remove(out.c_str());
  }
}

std::string CaseName(const ::testing::TestParamInfo<MixCase>& info) {
  return std::string(info.param.arch) + "_" + std::to_string(info.param.n_layer) + "_layers";
}

INSTANTIATE_TEST_SUITE_P(Families, QuantMixVsLlamaCpp,
                         ::testing::Values(MixCase{"llama", 16, 1, false},
                                           MixCase{"qwen2", 12, 4, true},
                                           MixCase{"phi3", 8, 2, false},
                                           MixCase{"qwen3moe", 8, 2, false, 4}),
                         CaseName);

}  // namespace
}  // namespace grove
