#include "model/drafter_file.h"

#include "base/error.h"
#include "base/fnv1a.h"
#include "io/gguf.h"
#include "model/config.h"

namespace grove {

DrafterKind ReadDrafterKind(const GgufFile& file) {
  if (!file.Has(kDrafterKindKey)) return DrafterKind::kModel;
  const std::string kind = file.GetString(kDrafterKindKey);
  if (kind == "feature") return DrafterKind::kFeature;
  if (kind == "parallel") return DrafterKind::kParallel;
  Fail("'", file.name(), "' is a drafter of kind '", kind,
       "', which this grove does not know (it knows: feature, parallel)");
}

int32_t ReadDrafterMasks(const GgufFile& file) {
  if (ReadDrafterKind(file) != DrafterKind::kParallel) return 0;
  const uint64_t k = file.GetUint(kDrafterMasksKey);
  if (k < 1 || k > 64)
    Fail("'", file.name(), "': ", kDrafterMasksKey, " = ", k, " is not in 1..64");
  return static_cast<int32_t>(k);
}

std::string TargetFingerprint(const GgufFile& target) {
  const ModelConfig c = ConfigFromGguf(target);
  Fnv1a h;
  const int64_t shape[2] = {c.n_embd, c.n_layer};
  h.Mix(shape, sizeof(shape));
  const std::string last = "blk." + std::to_string(c.n_layer - 1) + ".ffn_down.weight";
  for (const std::string& name :
       {std::string("token_embd.weight"), std::string("output_norm.weight"),
        std::string("output.weight"), last}) {
    const GgufTensor* t = target.FindTensor(name);
    if (!t) {
      if (name == "output.weight") continue;  // tied output
      Fail("'", target.name(), "' has no tensor '", name, "' to fingerprint");
    }
    h.Mix(t->data, static_cast<std::size_t>(t->n_bytes));
  }
  return h.Hex();
}

void CheckDrafterTarget(const GgufFile& drafter, const GgufFile& target) {
  const std::string want = drafter.GetString(kDrafterTargetFingerprintKey, "");
  const std::string have = TargetFingerprint(target);
  if (want == have) return;
  Fail("drafter '", drafter.name(), "' was trained for target '",
       drafter.GetString(kDrafterTargetNameKey, "?"), "' (fingerprint ", want, "), not for '",
       target.name(), "' (", target.GetString("general.name", "?"), ", fingerprint ", have,
       "): a feature drafter reads its own target's hidden states");
}

FeatureDrafterTensors ReadFeatureDrafterTensors(const GgufFile& drafter, const GgufFile& target) {
  FeatureDrafterTensors out;
  out.kind = ReadDrafterKind(drafter);
  if (out.kind != DrafterKind::kFeature && out.kind != DrafterKind::kParallel) {
    Fail("'", drafter.name(), "' is not a feature drafter (no ", kDrafterKindKey,
         " = feature or parallel)");
  }
  CheckDrafterTarget(drafter, target);
  const int64_t n_embd = ConfigFromGguf(drafter).n_embd;
  const int64_t target_n_embd = ConfigFromGguf(target).n_embd;
  if (n_embd != target_n_embd) {
    Fail("feature drafter '", drafter.name(), "' is ", n_embd, " wide, its target ", target_n_embd);
  }
  out.fusion = BindMatrix(drafter, kDrafterFusionTensor, 2 * n_embd, n_embd);
  out.masks = ReadDrafterMasks(drafter);
  if (out.masks > 0) {
    const GgufTensor* t = drafter.FindTensor(kDrafterMaskTensor);
    if (!t || t->shape != std::vector<int64_t>{n_embd, out.masks} || t->type != GgmlType::kF32) {
      Fail("parallel drafter '", drafter.name(), "': tensor ", kDrafterMaskTensor, " must be f32 ",
           n_embd, "x", out.masks);
    }
    out.mask_embeddings = reinterpret_cast<const float*>(t->data);
  }
  return out;
}

int32_t FirstDifferentTokenText(const GgufFile& a, const GgufFile& b, int32_t n,
                                std::string* a_text, std::string* b_text) {
  const char* key = "tokenizer.ggml.tokens";
  if (!a.Has(key) || !b.Has(key)) return -1;
  const auto ta = a.GetStringArray(key);
  const auto tb = b.GetStringArray(key);
  for (std::size_t i = 0; i < static_cast<std::size_t>(n) && i < ta.size() && i < tb.size(); ++i) {
    if (ta[i] != tb[i]) {
      *a_text = ta[i];
      *b_text = tb[i];
      return static_cast<int32_t>(i);
    }
  }
  return -1;
}

}  // namespace grove
