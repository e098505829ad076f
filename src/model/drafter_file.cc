#include "model/drafter_file.h"

#include <cinttypes>
#include <cstdio>

#include "base/error.h"
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
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  const int64_t shape[2] = {c.n_embd, c.n_layer};
  mix(reinterpret_cast<const uint8_t*>(shape), sizeof(shape));
  const std::string last = "blk." + std::to_string(c.n_layer - 1) + ".ffn_down.weight";
  for (const std::string& name :
       {std::string("token_embd.weight"), std::string("output_norm.weight"),
        std::string("output.weight"), last}) {
    const GgufTensor* t = target.FindTensor(name);
    if (!t) {
      if (name == "output.weight") continue;  // tied output
      Fail("'", target.name(), "' has no tensor '", name, "' to fingerprint");
    }
    mix(t->data, static_cast<std::size_t>(t->n_bytes));
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, h);
  return buf;
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
