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

}  // namespace grove
