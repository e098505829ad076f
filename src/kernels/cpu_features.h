// What the host CPU (and the OS, for the wide register state) supports, detected with cpuid/xgetbv.
#pragma once

#include <string>

namespace grove {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
};

// Detected on first use, then cached. A feature counts only if the OS saves the registers it needs
// (XCR0), so AVX-512 hardware under an OS or hypervisor that disables it reads as absent.
const CpuFeatures& HostCpuFeatures();

// "avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni avx512_bf16" (the ones present), or "none".
std::string CpuFeatureString(const CpuFeatures& features);

// The processor's name as the OS gives it ("AMD EPYC 9R14 96-Core Processor": the first "model
// name" of /proc/cpuinfo), or "" where it does not.
const std::string& CpuModelName();

}  // namespace grove
