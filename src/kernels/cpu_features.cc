#include "kernels/cpu_features.h"

#include <cstdint>
#include <fstream>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace grove {
namespace {

#if defined(__x86_64__) || defined(__i386__)

struct CpuidRegs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs Cpuid(uint32_t leaf, uint32_t subleaf) {
  CpuidRegs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return CpuidRegs{};
  return r;
}

// xgetbv through inline asm: the _xgetbv intrinsic would need -mxsave on this baseline file.
uint64_t ReadXcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool Bit(uint32_t value, int bit) { return (value >> bit) & 1u; }

CpuFeatures Detect() {
  CpuFeatures f;
  const uint32_t max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 1) return f;
  const CpuidRegs leaf1 = Cpuid(1, 0);
  if (!Bit(leaf1.ecx, 27)) return f;  // no OSXSAVE: the OS manages no AVX state
  const uint64_t xcr0 = ReadXcr0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;       // XMM and YMM state
  const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;  // plus opmask, ZMM_Hi256, Hi16_ZMM
  if (!os_avx || !Bit(leaf1.ecx, 28)) return f;  // AVX itself
  f.fma = Bit(leaf1.ecx, 12);
  f.f16c = Bit(leaf1.ecx, 29);
  if (max_leaf < 7) return f;
  const CpuidRegs leaf7 = Cpuid(7, 0);
  f.avx2 = Bit(leaf7.ebx, 5);
  if (os_avx512) {
    f.avx512f = Bit(leaf7.ebx, 16);
    f.avx512bw = Bit(leaf7.ebx, 30);
    f.avx512vl = Bit(leaf7.ebx, 31);
    f.avx512_vnni = Bit(leaf7.ecx, 11);
    if (leaf7.eax >= 1) f.avx512_bf16 = Bit(Cpuid(7, 1).eax, 5);
  }
  return f;
}

#else

CpuFeatures Detect() { return CpuFeatures{}; }

#endif

}  // namespace

const CpuFeatures& HostCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

std::string CpuFeatureString(const CpuFeatures& f) {
  std::string out;
  auto add = [&out](bool present, const char* name) {
    if (!present) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512_vnni, "avx512_vnni");
  add(f.avx512_bf16, "avx512_bf16");
  return out.empty() ? "none" : out;
}

const std::string& CpuModelName() {
  static const std::string name = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("model name", 0) != 0) continue;
      const std::size_t colon = line.find(':');
      if (colon == std::string::npos) break;
      const std::size_t start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? std::string() : line.substr(start);
    }
    return std::string();
  }();
  return name;
}

}  // namespace grove
