#include "kernels/kernel_set.h"

#include <cstdlib>
#include <string_view>

#include "base/log.h"
#include "base/named.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_tables.h"

namespace grove {
namespace {

bool CpuRuns(KernelLevel level) {
  const CpuFeatures& f = HostCpuFeatures();
  switch (level) {
    case KernelLevel::kScalar:
      return true;
    case KernelLevel::kAvx2:
      return f.avx2 && f.fma && f.f16c;
    case KernelLevel::kAvx512:
      // VNNI is required: without vpdpbusd the integer dot falls back to vpmaddubsw + vpmaddwd,
      // which is what the AVX2 level does already.
      return CpuRuns(KernelLevel::kAvx2) && f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni;
  }
  return false;
}

KernelLevel ChooseLevel() {
  KernelLevel level = BestKernelLevel();
  const char* env = std::getenv("GROVE_KERNELS");
  if (env == nullptr || *env == '\0') return level;
  const std::string_view cap(env);
  KernelLevel requested;
  if (cap == "scalar") {
    requested = KernelLevel::kScalar;
  } else if (cap == "avx2") {
    requested = KernelLevel::kAvx2;
  } else if (cap == "avx512") {
    requested = KernelLevel::kAvx512;
  } else {
    Log(LogLevel::kWarn, "kernels: ignoring GROVE_KERNELS='", cap,
        "' (expected scalar, avx2 or avx512); using ", KernelLevelName(level));
    return level;
  }
  if (requested > level) {
    Log(LogLevel::kWarn, "kernels: GROVE_KERNELS=", cap, " is not supported by this CPU; using ",
        KernelLevelName(level));
    return level;
  }
  return requested;
}

// Rounds up to a whole, odd number of cache lines. With a power-of-two stride the same element of
// every row of a tile falls in one L1 set (4 KiB period), which together with the streamed weights
// overflows the set's ways (measured: an 8-row tile 1.7x slower); an odd stride spreads the rows
// over different sets of L1 and L2.
int64_t OddCacheLines(int64_t bytes) {
  int64_t lines = (bytes + 63) / 64;
  if (lines % 2 == 0) ++lines;
  return lines * 64;
}

}  // namespace

int64_t ActQ8RowBytes(int64_t n_in) {
  const int64_t n_halves = n_in / 16;
  return OddCacheLines(ActQ8HalfSumOffset(n_in) + n_halves * static_cast<int64_t>(sizeof(float)));
}

int64_t FloatRowBytes(int64_t n_in) {
  return OddCacheLines(n_in * static_cast<int64_t>(sizeof(float)));
}

KernelLevel BestKernelLevel() {
  for (KernelLevel level : {KernelLevel::kAvx512, KernelLevel::kAvx2}) {
    if (CpuRuns(level)) return level;
  }
  return KernelLevel::kScalar;
}

const KernelSet* KernelsForLevel(KernelLevel level) {
  if (!CpuRuns(level)) return nullptr;
  switch (level) {
    case KernelLevel::kScalar:
      return &kScalarKernels;
    case KernelLevel::kAvx2:
      return &kAvx2Kernels;
    case KernelLevel::kAvx512:
      return &kAvx512Kernels;
  }
  return nullptr;
}

const KernelSet& ActiveKernels() {
  static const KernelSet* const active = KernelsForLevel(ChooseLevel());
  return *active;
}

const char* KernelLevelName(KernelLevel level) {
  static constexpr Named<KernelLevel> kNames[] = {{KernelLevel::kScalar, "scalar"},
                                                  {KernelLevel::kAvx2, "avx2"},
                                                  {KernelLevel::kAvx512, "avx512"}};
  // The table's names are literals: data() ends in their terminating zero.
  return NameOf(kNames, level, "unknown").data();
}

}  // namespace grove
