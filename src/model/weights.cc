#include "model/weights.h"

#include <array>

#include "base/error.h"
#include "io/gguf.h"
#include "quant/quant.h"

namespace grove {
namespace {

std::string ShapeString(std::initializer_list<int64_t> shape) {
  std::string s;
  for (int64_t d : shape) {
    if (!s.empty()) s += 'x';
    s += std::to_string(d);
  }
  return s;
}

const GgufTensor& Expect(const GgufFile& gguf, const std::string& name,
                         std::initializer_list<int64_t> shape) {
  const GgufTensor* t = gguf.FindTensor(name);
  if (!t) Fail("model: missing tensor '", name, "'");
  if (t->shape.size() != shape.size() ||
      !std::equal(shape.begin(), shape.end(), t->shape.begin())) {
    Fail("model: tensor '", name, "': expected ", ShapeString(shape), ", got ", t->shape_string());
  }
  if (!IsSupportedWeightType(t->type)) {
    Fail("model: tensor '", name, "' has type ", GgmlTypeName(t->type),
         ", which grove cannot compute with (supported: f32, f16, bf16, q8_0, q4_0, q4_k, q6_k)");
  }
  return *t;
}

std::vector<float> Vector(const GgufFile& gguf, const std::string& name, int64_t n) {
  const GgufTensor& t = Expect(gguf, name, {n});
  std::vector<float> v(n);
  DequantizeRow(t.type, t.data, v.data(), n);
  return v;
}

}  // namespace

WeightView BindMatrix(const GgufFile& gguf, const std::string& name, int64_t n_in, int64_t n_out) {
  const GgufTensor& t = Expect(gguf, name, {n_in, n_out});
  return WeightView{t.type, t.data, n_in, n_out, GgmlRowBytes(t.type, n_in)};
}

std::vector<WeightView*> ForwardMatrices(ModelWeights& weights) {
  std::vector<WeightView*> matrices = {&weights.output};
  for (LayerWeights& l : weights.layers) {
    const std::array<WeightView*, 7> layer = LayerMatrices(l);
    matrices.insert(matrices.end(), layer.begin(), layer.end());
  }
  return matrices;
}

std::array<WeightView*, 7> LayerMatrices(LayerWeights& l) {
  return {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down};
}

ModelWeights BindWeights(const GgufFile& gguf, const ModelConfig& c) {
  ModelWeights w;
  w.token_embd = BindMatrix(gguf, "token_embd.weight", c.n_embd, c.n_vocab);
  w.output_norm = Vector(gguf, "output_norm.weight", c.n_embd);
  w.output = c.tied_output ? w.token_embd : BindMatrix(gguf, "output.weight", c.n_embd, c.n_vocab);
  if (gguf.FindTensor("rope_freqs.weight")) {
    w.rope_freq_factors = Vector(gguf, "rope_freqs.weight", c.n_rot / 2);
    for (float f : w.rope_freq_factors) {
      if (!(f > 0.0f)) Fail("model: tensor 'rope_freqs.weight' holds a non-positive factor");
    }
  }
  w.layers.resize(c.n_layer);
  for (int32_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    l.attn_norm = Vector(gguf, p + "attn_norm.weight", c.n_embd);
    l.wq = BindMatrix(gguf, p + "attn_q.weight", c.n_embd, c.q_dim());
    l.wk = BindMatrix(gguf, p + "attn_k.weight", c.n_embd, c.kv_dim());
    l.wv = BindMatrix(gguf, p + "attn_v.weight", c.n_embd, c.kv_dim());
    l.wo = BindMatrix(gguf, p + "attn_output.weight", c.q_dim(), c.n_embd);
    l.ffn_norm = Vector(gguf, p + "ffn_norm.weight", c.n_embd);
    l.w_gate = BindMatrix(gguf, p + "ffn_gate.weight", c.n_embd, c.n_ff);
    l.w_up = BindMatrix(gguf, p + "ffn_up.weight", c.n_embd, c.n_ff);
    l.w_down = BindMatrix(gguf, p + "ffn_down.weight", c.n_ff, c.n_embd);
  }
  return w;
}

}  // namespace grove
