#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "base/error.h"
#include "io/gguf.h"

namespace grove {
namespace {

constexpr uint64_t kMaxDim = 1 << 20;

// Reads `<arch>.<key>` and remembers which keys were read, so that the ones left over can be named
// (nothing in a file is ignored in silence).
class ArchKeys {
 public:
  ArchKeys(const GgufFile& gguf, std::string arch) : gguf_(gguf), prefix_(std::move(arch) + ".") {}

  std::string Name(std::string_view key) const { return prefix_ + std::string(key); }
  bool Has(std::string_view key) {
    read_.insert(Name(key));
    return gguf_.Has(Name(key));
  }
  int32_t PositiveInt(std::string_view key, uint64_t max) {
    read_.insert(Name(key));
    const uint64_t v = gguf_.GetUint(Name(key));
    if (v == 0 || v > max)
      Fail("model: metadata '", Name(key), "' = ", v, " is out of range (1 to ", max, ")");
    return static_cast<int32_t>(v);
  }
  int32_t PositiveInt(std::string_view key, uint64_t max, int32_t fallback) {
    return Has(key) ? PositiveInt(key, max) : fallback;
  }
  uint64_t Uint(std::string_view key, uint64_t fallback) {
    read_.insert(Name(key));
    return gguf_.GetUint(Name(key), fallback);
  }
  double Float(std::string_view key, double fallback) {
    read_.insert(Name(key));
    return gguf_.GetFloat(Name(key), fallback);
  }
  std::string String(std::string_view key, std::string_view fallback) {
    read_.insert(Name(key));
    return gguf_.GetString(Name(key), fallback);
  }
  const GgufValue* Find(std::string_view key) {
    read_.insert(Name(key));
    return gguf_.Find(Name(key));
  }
  // Marks keys that carry nothing grove needs (documentation of the conversion) as read.
  void Accept(std::initializer_list<std::string_view> keys) {
    for (std::string_view k : keys) read_.insert(Name(k));
  }
  // Every `<arch>.` key of the file that nothing read.
  std::vector<std::string> Unread() const {
    std::vector<std::string> unread;
    for (const auto& [key, value] : gguf_.metadata()) {
      if (key.rfind(prefix_, 0) == 0 && !read_.count(key)) unread.push_back(key);
    }
    return unread;
  }

 private:
  const GgufFile& gguf_;
  std::string prefix_;
  std::set<std::string> read_;
};

// Heads, widths and the context.
void ReadShape(ArchKeys& keys, ModelConfig& c) {
  c.n_embd = keys.PositiveInt("embedding_length", kMaxDim);
  c.n_layer = keys.PositiveInt("block_count", 4096);
  // A mixture's width is its experts' (ReadExperts); llama.cpp reads feed_forward_length there
  // only as a fallback, and so does grove.
  const bool experts = c.family->feed_forward == FeedForwardKind::kExperts;
  c.n_ff = experts ? keys.PositiveInt("feed_forward_length", kMaxDim, 0)
                   : keys.PositiveInt("feed_forward_length", kMaxDim);
  c.n_head = keys.PositiveInt("attention.head_count", 4096);
  c.n_head_kv = keys.PositiveInt("attention.head_count_kv", 4096, c.n_head);
  c.n_ctx_train =
      keys.PositiveInt("context_length", std::numeric_limits<int32_t>::max(), /*fallback=*/2048);
  if (c.n_head % c.n_head_kv != 0) {
    Fail("model: attention.head_count ", c.n_head, " is not a multiple of head_count_kv ",
         c.n_head_kv);
  }
  if (keys.Has("attention.key_length")) {
    c.head_dim = keys.PositiveInt("attention.key_length", kMaxDim);
    if (keys.Has("attention.value_length") &&
        keys.Uint("attention.value_length", 0) != static_cast<uint64_t>(c.head_dim)) {
      Fail("model: '", keys.Name("attention.value_length"), "' differs from key_length ",
           c.head_dim, " (not supported)");
    }
  } else {
    if (c.n_embd % c.n_head != 0) {
      Fail("model: embedding_length ", c.n_embd, " is not a multiple of head_count ", c.n_head);
    }
    c.head_dim = c.n_embd / c.n_head;
  }
  if (c.head_dim % 2 != 0) Fail("model: head dimension ", c.head_dim, " is odd; RoPE needs pairs");
  c.rms_eps = static_cast<float>(keys.Float("attention.layer_norm_rms_epsilon", 1e-5));
  if (!(c.rms_eps > 0.0f && c.rms_eps < 1.0f)) {
    Fail("model: attention.layer_norm_rms_epsilon = ", c.rms_eps, " is out of range");
  }
  keys.Accept({"vocab_size"});
}

// Experts llama.cpp allows a layer (LLAMA_MAX_EXPERTS).
constexpr uint64_t kMaxExperts = 512;

// The mixture of a family whose feed-forward is experts; in any other family, experts are refused
// (a dense family's file with experts is a mislabelled mixture).
void ReadExperts(ArchKeys& keys, ModelConfig& c) {
  if (c.family->feed_forward != FeedForwardKind::kExperts) {
    const uint64_t experts = keys.Uint("expert_count", 0);
    if (experts > 0) {
      Fail("model: '", c.arch, "' file with ", experts, " experts: '", c.arch,
           "' models have no mixture of experts (is the file's architecture right?)");
    }
    keys.Accept({"expert_used_count"});
    return;
  }
  c.n_expert = keys.PositiveInt("expert_count", kMaxExperts);
  const uint64_t used = keys.Uint("expert_used_count", 0);
  if (used == 0 || used > static_cast<uint64_t>(c.n_expert)) {
    Fail("model: metadata '", keys.Name("expert_used_count"), "' = ", used,
         " is out of range: each token runs through 1 to expert_count = ", c.n_expert, " experts");
  }
  c.n_expert_used = static_cast<int32_t>(used);
  // As llama.cpp: without expert_feed_forward_length, each expert is feed_forward_length /
  // expert_used_count wide.
  if (keys.Has("expert_feed_forward_length")) {
    c.n_ff_expert = keys.PositiveInt("expert_feed_forward_length", kMaxDim);
    if (c.n_ff > 0) {
      c.notes.push_back(StrCat(
          "'", keys.Name("feed_forward_length"), "' = ", c.n_ff,
          " is not used: each expert is expert_feed_forward_length = ", c.n_ff_expert, " wide"));
    }
  } else {
    c.n_ff_expert = c.n_ff / c.n_expert_used;
    if (c.n_ff_expert == 0) {
      Fail("model: '", c.arch, "' file sets neither '", keys.Name("expert_feed_forward_length"),
           "' nor a feed_forward_length of at least expert_used_count");
    }
  }
  if (c.family->shared_expert) {
    // As llama.cpp: without expert_shared_feed_forward_length, the shared expert is
    // feed_forward_length wide.
    c.n_ff_shared = keys.PositiveInt("expert_shared_feed_forward_length", kMaxDim, c.n_ff);
    if (c.n_ff_shared == 0) {
      Fail("model: '", c.arch, "' file sets neither '",
           keys.Name("expert_shared_feed_forward_length"),
           "' nor a feed_forward_length for its shared expert");
    }
  }
  // The dense width is the widest expert's where buffers are sized by it.
  c.n_ff = std::max(c.n_ff_expert, c.n_ff_shared);
}

float PositiveFinite(ArchKeys& keys, std::string_view key, double fallback) {
  const double v = keys.Float(key, fallback);
  if (!(v > 0.0) || !std::isfinite(v) || v > 1e12)
    Fail("model: '", keys.Name(key), "' = ", v, " is out of range");
  return static_cast<float>(v);
}

// YaRN's keys, with llama.cpp's defaults: the whole ramp (ext_factor 1) between the dimensions
// that turn beta_fast and beta_slow times over the original context. A mscale from
// rope.scaling.yarn_log_multiplier (DeepSeek's) is refused by name: no family grove runs has it.
void ReadYarn(ArchKeys& keys, ModelConfig& c) {
  auto finite = [&](std::string_view key, double fallback, double lo, double hi) {
    const double v = keys.Float(key, fallback);
    if (!(v >= lo && v <= hi)) Fail("model: '", keys.Name(key), "' = ", v, " is out of range");
    return static_cast<float>(v);
  };
  c.yarn.ext_factor = finite("rope.scaling.yarn_ext_factor", 1.0, 0.0, 1.0);
  c.yarn.beta_fast = finite("rope.scaling.yarn_beta_fast", 32.0, 1e-3, 1e6);
  c.yarn.beta_slow = finite("rope.scaling.yarn_beta_slow", 1.0, 1e-3, 1e6);
  c.rope_attn_factor = finite("rope.scaling.yarn_attn_factor", c.rope_attn_factor, 1e-3, 1e3);
  if (keys.Float("rope.scaling.yarn_log_multiplier", 0.0) != 0.0) {
    Fail("model: '", keys.Name("rope.scaling.yarn_log_multiplier"),
         "' is not supported (DeepSeek's YaRN attention scale)");
  }
}

// Bases, scaling and the dimensions that rotate.
void ReadRope(ArchKeys& keys, ModelConfig& c) {
  c.n_rot = keys.PositiveInt("rope.dimension_count", c.head_dim, c.head_dim);
  if (c.n_rot % 2 != 0) Fail("model: rope.dimension_count ", c.n_rot, " is odd");
  c.rope.freq_base = PositiveFinite(keys, "rope.freq_base", 10000.0);
  if (!(c.rope.freq_base > 1.0f)) {
    Fail("model: rope.freq_base = ", c.rope.freq_base, " is out of range");
  }
  // llama.cpp's reading: the type defaults to linear, whose factor (or the older scale_linear)
  // defaults to none; "none" never scales.
  const std::string scaling = keys.String("rope.scaling.type", "linear");
  std::string factor_key = "rope.scaling.factor";
  double factor = keys.Float(factor_key, 0.0);
  if (factor == 0.0) factor = keys.Float(factor_key = "rope.scale_linear", 0.0);
  const bool longrope =
      scaling == "longrope" && c.family->rope_factors == RopeFactorRule::kLongShort;
  const bool yarn = scaling == "yarn";
  if (scaling != "linear" && scaling != "none" && !longrope && !yarn) {
    Fail("model: '", keys.Name("rope.scaling.type"), "' = '", scaling,
         "' is not supported (supported: none, linear, yarn",
         c.family->rope_factors == RopeFactorRule::kLongShort ? ", longrope" : "", ")");
  }
  // As llama.cpp: a factor divides the frequencies under any type but "none".
  if (scaling != "none" && factor != 0.0) {
    if (!(factor >= 1.0 && factor < 1e6))
      Fail("model: '", keys.Name(factor_key), "' = ", factor, " is out of range");
    c.rope.freq_scale = static_cast<float>(1.0 / factor);
  }
  c.rope_attn_factor = PositiveFinite(keys, "rope.scaling.attn_factor", 1.0);
  c.rope_orig_ctx = keys.PositiveInt("rope.scaling.original_context_length",
                                     std::numeric_limits<int32_t>::max(), c.n_ctx_train);
  keys.Accept({"rope.scaling.finetuned"});
  if (yarn) ReadYarn(keys, c);
  if (c.family->window == WindowRule::kLocalGlobal && c.family->local_rope_apart) {
    // Local layers keep the base they were trained with and are never scaled (llama.cpp reads
    // freq_base_swa, 10000 when absent).
    c.local_rope = true;
    c.rope_local.freq_base = PositiveFinite(keys, "rope.freq_base_swa", 10000.0);
    c.rope_local.freq_scale = 1.0f;
  } else if (c.family->window == WindowRule::kLocalGlobal && keys.Has("rope.freq_base_swa")) {
    // Local layers rotate as the global ones, with the file's base (llama.cpp's default for a
    // sliding-window family: the global base and scale).
    c.local_rope = true;
    c.rope_local = c.rope;
    c.rope_local.freq_base = PositiveFinite(keys, "rope.freq_base_swa", 10000.0);
  }
}

// Which layers see a window, by the family's rule and the file's pattern.
void ReadWindow(ArchKeys& keys, ModelConfig& c) {
  c.local_layers.assign(static_cast<std::size_t>(c.n_layer), 0);
  const uint64_t window = keys.Uint("attention.sliding_window", 0);
  if (window > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
    Fail("model: '", keys.Name("attention.sliding_window"), "' = ", window, " is out of range");
  if (window == 0) {
    if (keys.Has("attention.sliding_window_pattern")) {
      c.notes.push_back(StrCat("'", keys.Name("attention.sliding_window_pattern"),
                               "' is not used: the file sets no sliding window"));
    }
    return;
  }
  switch (c.family->window) {
    case WindowRule::kRefused:
      Fail("model: '", keys.Name("attention.sliding_window"), "' = ", window, ", but '", c.arch,
           "' models have no sliding-window attention (is the file's architecture right?)");
    case WindowRule::kNotApplied:
      c.notes.push_back(StrCat("'", keys.Name("attention.sliding_window"), "' = ", window,
                               " is not applied: ", c.family->models,
                               " files carry a window the model does not use consistently; "
                               "every layer sees the whole context, as in llama.cpp"));
      return;
    case WindowRule::kEveryLayer:
      std::fill(c.local_layers.begin(), c.local_layers.end(), 1);
      break;
    case WindowRule::kLocalGlobal: {
      const GgufValue* pattern = keys.Find("attention.sliding_window_pattern");
      if (pattern && pattern->type == GgufValueType::kArray) {
        if (pattern->array_size() != static_cast<std::size_t>(c.n_layer)) {
          Fail("model: '", keys.Name("attention.sliding_window_pattern"), "' has ",
               pattern->array_size(), " entries for ", c.n_layer, " layers");
        }
        for (int32_t i = 0; i < c.n_layer; ++i) {
          const auto* b = std::get_if<bool>(&pattern->array[static_cast<std::size_t>(i)]);
          if (!b) Fail("model: '", keys.Name("attention.sliding_window_pattern"), "' is not bools");
          c.local_layers[static_cast<std::size_t>(i)] = *b ? 1 : 0;
        }
      } else {
        // Every period-th layer is global: layer i is local when i % period < period - 1.
        const uint64_t period = keys.Uint("attention.sliding_window_pattern",
                                          static_cast<uint64_t>(c.family->global_layer_period));
        if (period > 4096) Fail("model: sliding_window_pattern ", period, " is out of range");
        for (int32_t i = 0; i < c.n_layer; ++i) {
          c.local_layers[static_cast<std::size_t>(i)] =
              period == 0 || static_cast<uint64_t>(i) % period < period - 1;
        }
      }
      break;
    }
  }
  c.sliding_window = static_cast<int32_t>(window);
}

// Gated DeltaNet's keys (Qwen3.5) and which layers are attention. Each inconsistency is named.
void ReadGatedDeltaNet(ArchKeys& keys, ModelConfig& c) {
  GatedDeltaNetShape& g = c.gdn;
  g.conv_kernel = keys.PositiveInt("ssm.conv_kernel", 64);
  g.d_state = keys.PositiveInt("ssm.state_size", 4096);
  g.n_k_heads = keys.PositiveInt("ssm.group_count", 4096);
  g.n_v_heads = keys.PositiveInt("ssm.time_step_rank", 4096);
  const int32_t inner = keys.PositiveInt("ssm.inner_size", kMaxDim);
  if (int64_t{inner} != int64_t{g.d_state} * g.n_v_heads) {
    Fail("model: '", keys.Name("ssm.inner_size"), "' = ", inner, " is not ssm.state_size ",
         g.d_state, " x ssm.time_step_rank ", g.n_v_heads,
         " (value heads of the state's size, as llama.cpp requires)");
  }
  // Each sequence keeps state_size^2 floats per value head and layer (the delta state): a file
  // that asks for more than 256 MiB of it per layer is refused by name, not left to an
  // allocation failure (Qwen3.5's largest, 48 heads of 128, keep 3 MiB).
  constexpr int64_t kMaxDeltaStateFloats = int64_t{1} << 26;
  if (int64_t{g.d_state} * g.d_state * g.n_v_heads > kMaxDeltaStateFloats) {
    Fail("model: '", keys.Name("ssm.state_size"), "' = ", g.d_state, " with ",
         keys.Name("ssm.time_step_rank"), " = ", g.n_v_heads, " is a delta state of ",
         int64_t{g.d_state} * g.d_state * g.n_v_heads, " floats per layer, above grove's ",
         kMaxDeltaStateFloats);
  }
  if (g.n_v_heads % g.n_k_heads != 0) {
    Fail("model: '", keys.Name("ssm.group_count"), "' = ", g.n_k_heads,
         " does not divide ssm.time_step_rank ", g.n_v_heads);
  }
  const int32_t interval = keys.PositiveInt("full_attention_interval", 4096, 4);
  if (keys.Has("attention.recurrent_layers")) {
    Fail("model: '", keys.Name("attention.recurrent_layers"),
         "' is not supported (grove reads full_attention_interval)");
  }
  for (int32_t i = 0; i < c.n_layer; ++i) {
    if ((i + 1) % interval != 0) c.layer_kinds[i].mixer = MixerKind::kGatedDeltaNet;
  }
  // The interleaved multi-section rotation (llama.cpp's IMROPE): rotary pair i takes section
  // i % 3's position while i < 3 x that section's size, else the fourth's. Text puts every one of
  // the first three at the token's position (and the fourth at 0), so grove rotates as the halves
  // pairing when every pair falls in the first three; a file where some pair would not is refused.
  const GgufValue* sections = keys.Find("rope.dimension_sections");
  if (!sections) Fail("model: missing metadata '", keys.Name("rope.dimension_sections"), "'");
  if (sections->type != GgufValueType::kArray || sections->array.size() != 4)
    Fail("model: '", keys.Name("rope.dimension_sections"), "' is not an array of 4 integers");
  int64_t s[4];
  for (int j = 0; j < 4; ++j) {
    const GgufValue::Scalar& v = sections->array[static_cast<std::size_t>(j)];
    if (const auto* u = std::get_if<uint64_t>(&v)) {
      s[j] = static_cast<int64_t>(*u);
    } else if (const auto* i = std::get_if<int64_t>(&v)) {
      s[j] = *i;
    } else {
      Fail("model: '", keys.Name("rope.dimension_sections"), "' is not an array of 4 integers");
    }
    if (s[j] < 0 || s[j] > c.n_rot) {
      Fail("model: '", keys.Name("rope.dimension_sections"), "' entry ", j, " = ", s[j],
           " is out of range (0 to rope.dimension_count ", c.n_rot, ")");
    }
  }
  for (int32_t pair = 0; pair < c.n_rot / 2; ++pair) {
    if (pair >= 3 * s[pair % 3]) {
      Fail("model: '", keys.Name("rope.dimension_sections"), "' = [", s[0], ", ", s[1], ", ", s[2],
           ", ", s[3], "] leaves rotary pair ", pair,
           " to the fourth section, which grove does not rotate for text");
    }
  }
}

}  // namespace

bool ModelConfig::has_recurrent_layers() const {
  return std::any_of(layer_kinds.begin(), layer_kinds.end(),
                     [](const LayerKind& k) { return k.mixer == MixerKind::kGatedDeltaNet; });
}

int32_t ModelConfig::n_local_layers() const {
  return sliding_window > 0 ? static_cast<int32_t>(
                                  std::count(local_layers.begin(), local_layers.end(), uint8_t{1}))
                            : 0;
}

int64_t ModelConfig::n_params() const {
  const int64_t d = n_embd;
  const bool expert_biases = family && family->expert_biases;
  const int64_t feed_forward =
      n_expert > 0 ? d * n_expert * (int64_t{n_ff_expert} * 3 + 1) +
                         (n_ff_shared > 0 ? d * (int64_t{n_ff_shared} * 3 + 1) : 0) +
                         (expert_biases ? n_expert * (2 * int64_t{n_ff_expert} + d + 1) : 0)
                   : d * n_ff * 3;
  // Biases and sinks (Qwen2's Q/K/V biases, gpt-oss's output bias and sinks).
  const int64_t attention_vectors =
      (family && family->qkv_bias ? q_dim() + 2 * int64_t{kv_dim()} : 0) +
      (family && family->output_bias ? d : 0) + (family && family->attention_sinks ? n_head : 0);
  const int64_t attention = d * q_dim() * (family && family->gated_attention ? 3 : 2) +
                            d * kv_dim() * 2 + attention_vectors + feed_forward + d * 2;
  // A Gated DeltaNet layer: its four input projections, conv1d, output projection and vectors.
  const int64_t recurrent = d * (gdn.conv_dim() + gdn.value_dim() + 2 * gdn.n_v_heads) +
                            int64_t{gdn.value_dim()} * d +
                            int64_t{gdn.conv_dim()} * gdn.conv_kernel + 3 * gdn.n_v_heads +
                            gdn.d_state + feed_forward + d * 2;
  int64_t layers = 0;
  for (int32_t l = 0; l < n_layer; ++l) {
    const bool is_gdn = static_cast<std::size_t>(l) < layer_kinds.size() && is_recurrent(l);
    layers += is_gdn ? recurrent : attention;
  }
  int64_t embed = int64_t{n_vocab} * n_embd;
  return layers + embed * (tied_output ? 1 : 2) + n_embd;
}

ModelConfig ConfigFromGguf(const GgufFile& gguf) {
  ModelConfig c;
  c.arch = gguf.GetString("general.architecture");
  c.family = &FindFamily(c.arch);
  c.name = gguf.GetString("general.name", "");
  ArchKeys keys(gguf, c.arch);
  ReadShape(keys, c);
  ReadExperts(keys, c);
  ReadRope(keys, c);
  ReadWindow(keys, c);
  // Every layer is attention and the family's feed-forward, except the recurrent layers of a
  // hybrid family, whose mixer ReadGatedDeltaNet marks (their feed-forward stays the family's).
  c.layer_kinds.assign(static_cast<std::size_t>(c.n_layer),
                       LayerKind{.feed_forward = c.family->feed_forward});
  if (c.family->gated_delta_net) ReadGatedDeltaNet(keys, c);
  // Gemma 3 27B scales queries by 1/sqrt(n_embd / n_head) = 1/sqrt(168), not by its key length
  // (128), as Google's reference does; llama.cpp recognises it by its 62 layers, and so does grove.
  const bool gemma3_27b = c.arch == "gemma3" && c.n_layer == 62;
  c.query_scale =
      1.0f / std::sqrt(static_cast<float>(gemma3_27b ? c.n_embd / c.n_head : c.head_dim));
  if (c.family->scaled_embedding) c.embedding_scale = std::sqrt(static_cast<float>(c.n_embd));
  if (c.family->logit_softcap) {
    c.logit_softcap = static_cast<float>(keys.Float("final_logit_softcapping", 0.0));
    if (!(c.logit_softcap >= 0.0f && c.logit_softcap < 1e6f))
      Fail("model: final_logit_softcapping = ", c.logit_softcap, " is out of range");
  }

  const GgufTensor& embd = gguf.GetTensor("token_embd.weight");
  if (embd.shape.size() != 2 || embd.shape[0] != c.n_embd) {
    Fail("model: tensor 'token_embd.weight': expected ", c.n_embd, "xN_VOCAB, got ",
         embd.shape_string());
  }
  if (embd.shape[1] > std::numeric_limits<int32_t>::max()) Fail("model: vocabulary too large");
  c.n_vocab = static_cast<int32_t>(embd.shape[1]);
  if (keys.Has("vocab_size") && keys.Uint("vocab_size", 0) != static_cast<uint64_t>(c.n_vocab)) {
    Fail("model: metadata '", keys.Name("vocab_size"), "' = ", keys.Uint("vocab_size", 0),
         " but tensor 'token_embd.weight' has ", c.n_vocab, " rows");
  }
  c.tied_output = gguf.FindTensor("output.weight") == nullptr;
  for (const std::string& key : keys.Unread()) {
    c.notes.push_back(StrCat("metadata '", key, "' is not used by grove"));
  }
  return c;
}

}  // namespace grove
