#include "train/model_file.h"

#include <cstring>

#include "base/error.h"
#include "model/config.h"
#include "quant/quant.h"

namespace grove {

GgufKeyValues TokenizerKeys(const GgufFile& file) {
  GgufKeyValues keys;
  for (const auto& [key, value] : file.metadata()) {
    if (key.starts_with("tokenizer.")) keys.emplace_back(key, value);
  }
  if (!file.Has("tokenizer.ggml.tokens"))
    Fail("train: '", file.name(), "' has no tokenizer (tokenizer.ggml.tokens)");
  return keys;
}

int32_t TokenizerVocabSize(const GgufKeyValues& keys) {
  for (const auto& [key, value] : keys) {
    if (key == "tokenizer.ggml.tokens") return static_cast<int32_t>(value.array_size());
  }
  Fail("train: tokenizer has no tokenizer.ggml.tokens");
}

bool IsTrainerExportType(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16 ||
         type == GgmlType::kQ8_0;
}

GgufWriter TrainedModelWriter(const ParamLayout& layout, const float* params,
                              const GgufKeyValues& tokenizer, GgmlType type,
                              const std::string& name) {
  if (!IsTrainerExportType(type)) {
    Fail("export: type ", GgmlTypeName(type),
         " is not one the trainer exports (f32, f16, bf16, q8_0)");
  }
  const TrainShape& s = layout.shape();
  const int64_t block = GgmlTraits(type).block_size;
  if (s.n_embd % block != 0 || s.n_ff % block != 0) {
    Fail("export: widths ", s.n_embd, " and ", s.n_ff, " must be multiples of the ",
         GgmlTypeName(type), " block size ", block);
  }
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", name);
  w.SetUint32("general.file_type", type == GgmlType::kF32    ? 0
                                   : type == GgmlType::kF16  ? 1
                                   : type == GgmlType::kQ8_0 ? 7
                                                             : 32);
  w.SetUint32("llama.context_length", static_cast<uint32_t>(s.n_ctx));
  w.SetUint32("llama.embedding_length", static_cast<uint32_t>(s.n_embd));
  w.SetUint32("llama.block_count", static_cast<uint32_t>(s.n_layer));
  w.SetUint32("llama.feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.SetUint32("llama.attention.head_count", static_cast<uint32_t>(s.n_head));
  w.SetUint32("llama.attention.head_count_kv", static_cast<uint32_t>(s.n_head));
  w.SetUint32("llama.rope.dimension_count", static_cast<uint32_t>(s.head_dim()));
  w.SetFloat32("llama.attention.layer_norm_rms_epsilon", s.rms_eps);
  w.SetFloat32("llama.rope.freq_base", s.rope_freq_base);
  w.SetUint32("llama.vocab_size", static_cast<uint32_t>(s.n_vocab));
  for (const auto& [key, value] : tokenizer) w.SetValue(key, value);
  for (const ParamTensor& t : layout.tensors()) {
    const float* data = params + t.offset;
    if (!t.is_matrix || type == GgmlType::kF32) {
      w.AddTensor(t.name, t.shape, GgmlType::kF32, [data, n = t.size](std::span<uint8_t> out) {
        std::memcpy(out.data(), data, static_cast<std::size_t>(n) * sizeof(float));
      });
      continue;
    }
    const int64_t n_in = t.shape[0], n_out = t.shape[1];
    w.AddTensor(t.name, t.shape, type, [data, n_in, n_out, type](std::span<uint8_t> out) {
      const int64_t row_bytes = GgmlRowBytes(type, n_in);
      for (int64_t r = 0; r < n_out; ++r)
        QuantizeRow(type, data + r * n_in, out.data() + r * row_bytes, n_in);
    });
  }
  return w;
}

TrainShape TrainShapeOf(const ModelConfig& c) {
  return {.n_vocab = c.n_vocab,
          .n_embd = c.n_embd,
          .n_layer = c.n_layer,
          .n_head = c.n_head,
          .n_ff = c.n_ff,
          .n_ctx = c.n_ctx_train,
          .rope_freq_base = c.rope.freq_base,
          .rms_eps = c.rms_eps,
          .tied_output = c.tied_output};
}

LoadedTrainModel LoadTrainModel(const GgufFile& file) {
  const ModelConfig c = ConfigFromGguf(file);
  auto refuse = [&](const std::string& why) { Fail("train: '", file.name(), "': ", why); };
  if (c.arch != "llama")
    refuse(StrCat("the trainer trains 'llama' models, and this one is '", c.arch, "'"));
  if (c.sliding_window > 0) refuse("sliding-window attention is not supported by the trainer");
  if (c.rope_attn_factor != 1.0f) refuse("LongRoPE is not supported by the trainer");
  if (c.n_head_kv != c.n_head)
    refuse(StrCat("grouped-query attention (", c.n_head, "/", c.n_head_kv,
                  " heads) is not supported by the trainer"));
  if (c.head_dim * c.n_head != c.n_embd) refuse("head size times heads differs from the width");
  if (c.n_rot != c.head_dim) refuse("RoPE over part of the head is not supported by the trainer");
  if (c.rope.freq_scale != 1.0f || file.FindTensor("rope_freqs.weight"))
    refuse("RoPE scaling is not supported by the trainer");
  LoadedTrainModel m;
  m.shape = TrainShapeOf(c);
  m.params = ReadLayoutParams(file, ParamLayout(m.shape));
  m.tokenizer = TokenizerKeys(file);
  return m;
}

std::vector<float> ReadLayoutParams(const GgufFile& file, const ParamLayout& layout) {
  auto refuse = [&](const std::string& why) { Fail("train: '", file.name(), "': ", why); };
  std::vector<float> params(static_cast<std::size_t>(layout.total()));
  for (const ParamTensor& t : layout.tensors()) {
    const GgufTensor* g = file.FindTensor(t.name);
    if (!g) refuse(StrCat("no tensor '", t.name, "'"));
    if (g->shape != t.shape)
      refuse(StrCat("tensor '", t.name, "' is ", g->shape_string(), ", expected another shape"));
    if (!CanDequantize(g->type))
      refuse(StrCat("tensor '", t.name, "' has unsupported type ", GgmlTypeName(g->type)));
    const int64_t n_in = t.shape[0];
    const int64_t row_bytes = GgmlRowBytes(g->type, n_in);
    for (int64_t r = 0; r < t.size / n_in; ++r) {
      DequantizeRow(g->type, g->data + r * row_bytes, params.data() + t.offset + r * n_in, n_in);
    }
  }
  return params;
}

}  // namespace grove
