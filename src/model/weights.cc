#include "model/weights.h"

#include <array>
#include <unordered_set>

#include "base/error.h"
#include "io/gguf.h"
#include "model/drafter_file.h"
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
         ", which grove cannot compute with yet (it computes with ", SupportedWeightTypeNames(),
         ")");
  }
  return *t;
}

// Rows [first, first + n) of a matrix: the parts of a fused tensor (Phi-3's attn_qkv, ffn_up).
WeightView Rows(const WeightView& w, int64_t first, int64_t n) {
  WeightView part = w;
  part.data = static_cast<const uint8_t*>(w.data) + first * w.row_bytes;
  part.n_out = n;
  return part;
}

// Binds tensors by name and remembers which ones were bound, so that the ones left over can be
// named.
class TensorBinder {
 public:
  explicit TensorBinder(const GgufFile& gguf) : gguf_(gguf) {}

  bool Has(const std::string& name) const { return gguf_.FindTensor(name) != nullptr; }
  WeightView Matrix(const std::string& name, int64_t n_in, int64_t n_out) {
    used_.insert(name);
    return BindMatrix(gguf_, name, n_in, n_out);
  }
  std::vector<float> Vector(const std::string& name, int64_t n) {
    used_.insert(name);
    const GgufTensor& t = Expect(gguf_, name, {n});
    std::vector<float> v(n);
    DequantizeRow(t.type, t.data, v.data(), n);
    return v;
  }
  // A 3-D tensor of `shape` (n_in, n_out, n_expert) as one matrix of n_out * n_expert rows.
  WeightView Experts(const std::string& name, std::initializer_list<int64_t> shape) {
    used_.insert(name);
    const GgufTensor& t = Expect(gguf_, name, shape);
    const int64_t n_in = t.shape[0];
    return WeightView{t.type, t.data, n_in, t.shape[1] * t.shape[2], GgmlRowBytes(t.type, n_in)};
  }
  // A vector that the converter may also write as a matrix of one row ({n} or {n, 1}: llama.cpp
  // accepts both for ffn_gate_inp_shexp, whose Hugging Face weight is (1, n)).
  std::vector<float> RowVector(const std::string& name, int64_t n) {
    const GgufTensor* t = gguf_.FindTensor(name);
    if (t != nullptr && t->shape.size() == 2 && t->shape[1] == 1) return Matrix2(name, n, 1);
    return Vector(name, n);
  }
  std::vector<float> OptionalVector(const std::string& name, int64_t n) {
    return Has(name) ? Vector(name, n) : std::vector<float>{};
  }
  // A small matrix read as f32 values, row after row (ssm_conv1d).
  std::vector<float> Matrix2(const std::string& name, int64_t n_in, int64_t n_out) {
    used_.insert(name);
    const GgufTensor& t = Expect(gguf_, name, {n_in, n_out});
    std::vector<float> v(static_cast<std::size_t>(n_in * n_out));
    const int64_t row_bytes = GgmlRowBytes(t.type, n_in);
    for (int64_t r = 0; r < n_out; ++r)
      DequantizeRow(t.type, t.data + r * row_bytes, v.data() + r * n_in, n_in);
    return v;
  }
  void Use(const std::string& name) { used_.insert(name); }
  // Throws naming the first tensor of the file (in file order) that nothing bound.
  void CheckEveryTensorUsed(const std::string& arch) const {
    for (const GgufTensor& t : gguf_.tensors()) {
      if (!used_.count(t.name)) {
        Fail("model: tensor '", t.name, "' is not used by architecture '", arch,
             "' (is the file's architecture right?)");
      }
    }
  }

 private:
  const GgufFile& gguf_;
  std::unordered_set<std::string> used_;
};

// Per-frequency divisors of the rotation, positive.
std::vector<float> RopeFactors(TensorBinder& bind, const std::string& name, int32_t n_rot) {
  std::vector<float> f = bind.Vector(name, n_rot / 2);
  for (float v : f) {
    if (!(v > 0.0f)) Fail("model: tensor '", name, "' holds a non-positive factor");
  }
  return f;
}

void BindAttention(TensorBinder& bind, const ModelConfig& c, const std::string& p,
                   LayerWeights& l) {
  const ModelFamily& f = *c.family;
  if (f.fused_qkv && bind.Has(p + "attn_qkv.weight")) {
    const WeightView qkv =
        bind.Matrix(p + "attn_qkv.weight", c.n_embd, int64_t{c.q_dim()} + 2 * c.kv_dim());
    l.wq = Rows(qkv, 0, c.q_dim());
    l.wk = Rows(qkv, c.q_dim(), c.kv_dim());
    l.wv = Rows(qkv, int64_t{c.q_dim()} + c.kv_dim(), c.kv_dim());
  } else if (f.gated_attention) {
    // Each head's query rows, then its gate's: 2 q_dim rows (cpu_attention.cc splits them).
    l.wq = bind.Matrix(p + "attn_q.weight", c.n_embd, 2 * int64_t{c.q_dim()});
    l.wk = bind.Matrix(p + "attn_k.weight", c.n_embd, c.kv_dim());
    l.wv = bind.Matrix(p + "attn_v.weight", c.n_embd, c.kv_dim());
  } else {
    l.wq = bind.Matrix(p + "attn_q.weight", c.n_embd, c.q_dim());
    l.wk = bind.Matrix(p + "attn_k.weight", c.n_embd, c.kv_dim());
    l.wv = bind.Matrix(p + "attn_v.weight", c.n_embd, c.kv_dim());
  }
  if (f.qkv_bias) {
    l.bq = bind.Vector(p + "attn_q.bias", c.q_dim());
    l.bk = bind.Vector(p + "attn_k.bias", c.kv_dim());
    l.bv = bind.Vector(p + "attn_v.bias", c.kv_dim());
  }
  if (f.qk_norm) {
    l.q_norm = bind.Vector(p + "attn_q_norm.weight", c.head_dim);
    l.k_norm = bind.Vector(p + "attn_k_norm.weight", c.head_dim);
  }
  l.wo = bind.Matrix(p + "attn_output.weight", c.q_dim(), c.n_embd);
  if (f.output_bias) l.bo = bind.Vector(p + "attn_output.bias", c.n_embd);
  if (f.attention_sinks) l.attn_sinks = bind.Vector(p + "attn_sinks.weight", c.n_head);
  if (f.sandwich_norms) l.attn_post_norm = bind.Vector(p + "post_attention_norm.weight", c.n_embd);
}

// A Gated DeltaNet layer: every ssm_* tensor is required, each named when missing or misshapen.
void BindGatedDeltaNet(TensorBinder& bind, const ModelConfig& c, const std::string& p,
                       GatedDeltaNetWeights& g) {
  const GatedDeltaNetShape& s = c.gdn;
  g.qkv = bind.Matrix(p + "attn_qkv.weight", c.n_embd, s.conv_dim());
  g.z = bind.Matrix(p + "attn_gate.weight", c.n_embd, s.value_dim());
  g.beta = bind.Matrix(p + "ssm_beta.weight", c.n_embd, s.n_v_heads);
  g.alpha = bind.Matrix(p + "ssm_alpha.weight", c.n_embd, s.n_v_heads);
  g.out = bind.Matrix(p + "ssm_out.weight", s.value_dim(), c.n_embd);
  g.conv = bind.Matrix2(p + "ssm_conv1d.weight", s.conv_kernel, s.conv_dim());
  g.dt_bias = bind.Vector(p + "ssm_dt.bias", s.n_v_heads);
  g.a = bind.Vector(p + "ssm_a", s.n_v_heads);
  g.norm = bind.Vector(p + "ssm_norm.weight", s.d_state);
}

// One of a mixture's 3-D expert tensors, (n_in, n_out, n_expert) in ggml's order, as a matrix of
// n_expert blocks of n_out rows (ops/experts.h).
WeightView ExpertTensor(TensorBinder& bind, const ModelConfig& c, const std::string& name,
                        int64_t n_in, int64_t n_out) {
  return bind.Experts(name, {n_in, n_out, c.n_expert});
}

void BindExperts(TensorBinder& bind, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  ExpertWeights& e = l.experts;
  e.n_expert = c.n_expert;
  e.n_used = c.n_expert_used;
  const std::string router = p + "ffn_gate_inp.weight";
  if (!bind.Has(router)) {
    Fail("model: missing tensor '", router, "' (the router of layer ", p.substr(4, p.size() - 5),
         "'s ", c.n_expert, " experts)");
  }
  e.router = bind.Matrix(router, c.n_embd, c.n_expert);
  e.gate = ExpertTensor(bind, c, p + "ffn_gate_exps.weight", c.n_embd, c.n_ff_expert);
  e.up = ExpertTensor(bind, c, p + "ffn_up_exps.weight", c.n_embd, c.n_ff_expert);
  e.down = ExpertTensor(bind, c, p + "ffn_down_exps.weight", c.n_ff_expert, c.n_embd);
  e.rule = c.family->router;
  if (c.family->expert_biases) {
    e.router_bias = bind.Vector(p + "ffn_gate_inp.bias", c.n_expert);
    e.gate_bias = bind.Matrix2(p + "ffn_gate_exps.bias", c.n_ff_expert, c.n_expert);
    e.up_bias = bind.Matrix2(p + "ffn_up_exps.bias", c.n_ff_expert, c.n_expert);
    e.down_bias = bind.Matrix2(p + "ffn_down_exps.bias", c.n_embd, c.n_expert);
  }
  if (c.family->shared_expert) {
    // The shared expert is a dense gated feed-forward, so it takes the dense matrices' places
    // (grouped, counted and run as they are).
    l.w_gate = bind.Matrix(p + "ffn_gate_shexp.weight", c.n_embd, c.n_ff_shared);
    l.w_up = bind.Matrix(p + "ffn_up_shexp.weight", c.n_embd, c.n_ff_shared);
    l.w_down = bind.Matrix(p + "ffn_down_shexp.weight", c.n_ff_shared, c.n_embd);
    l.shared_expert_gate = bind.RowVector(p + "ffn_gate_inp_shexp.weight", c.n_embd);
  }
}

void BindFeedForward(TensorBinder& bind, const ModelConfig& c, const std::string& p,
                     LayerWeights& l) {
  if (c.family->feed_forward == FeedForwardKind::kExperts) {
    BindExperts(bind, c, p, l);
  } else if (c.family->fused_gate_up) {
    const WeightView gate_up = bind.Matrix(p + "ffn_up.weight", c.n_embd, 2 * int64_t{c.n_ff});
    l.w_gate = Rows(gate_up, 0, c.n_ff);
    l.w_up = Rows(gate_up, c.n_ff, c.n_ff);
  } else {
    l.w_gate = bind.Matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff);
    l.w_up = bind.Matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);
  }
  if (c.family->feed_forward != FeedForwardKind::kExperts) {
    l.w_down = bind.Matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
  }
  if (c.family->sandwich_norms) l.ffn_post_norm = bind.Vector(p + "post_ffw_norm.weight", c.n_embd);
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

std::array<WeightView*, 5> GatedDeltaNetMatrices(LayerWeights& l) {
  return {&l.gdn.qkv, &l.gdn.z, &l.gdn.beta, &l.gdn.alpha, &l.gdn.out};
}

std::array<const WeightView*, 4> ExpertMatrices(const LayerWeights& l) {
  return {&l.experts.router, &l.experts.gate, &l.experts.up, &l.experts.down};
}

ModelWeights BindWeights(const GgufFile& gguf, const ModelConfig& c) {
  TensorBinder bind(gguf);
  ModelWeights w;
  w.token_embd = bind.Matrix("token_embd.weight", c.n_embd, c.n_vocab);
  w.output_norm = bind.Vector("output_norm.weight", c.n_embd);
  w.output = c.tied_output ? w.token_embd : bind.Matrix("output.weight", c.n_embd, c.n_vocab);
  switch (c.family->rope_factors) {
    case RopeFactorRule::kNone:
      break;
    case RopeFactorRule::kFrequencies:
      if (bind.Has("rope_freqs.weight"))
        w.rope_freq_factors = RopeFactors(bind, "rope_freqs.weight", c.n_rot);
      break;
    case RopeFactorRule::kLongShort:
      if (bind.Has("rope_factors_long.weight") || bind.Has("rope_factors_short.weight")) {
        w.rope_factors_long = RopeFactors(bind, "rope_factors_long.weight", c.n_rot);
        w.rope_factors_short = RopeFactors(bind, "rope_factors_short.weight", c.n_rot);
      }
      break;
  }
  w.layers.resize(c.n_layer);
  for (int32_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    l.attn_norm = bind.Vector(p + "attn_norm.weight", c.n_embd);
    if (c.is_recurrent(i)) {
      BindGatedDeltaNet(bind, c, p, l.gdn);
    } else {
      BindAttention(bind, c, p, l);
    }
    l.ffn_norm = bind.Vector(p + std::string(c.family->ffn_norm) + ".weight", c.n_embd);
    BindFeedForward(bind, c, p, l);
  }
  // A drafter file's own tensors are bound by its drafter (speculate/feature_drafter.h).
  if (ReadDrafterKind(gguf) != DrafterKind::kModel) {
    bind.Use(kDrafterFusionTensor);
    bind.Use(kDrafterMaskTensor);
  }
  bind.CheckEveryTensorUsed(c.arch);
  return w;
}

}  // namespace grove
