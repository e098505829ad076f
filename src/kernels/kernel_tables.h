// The kernel table of each level, one per source file (scalar_kernels.cc, avx2_kernels.cc,
// avx512_kernels.cc). Only kernel_set.cc reads them, after checking that the CPU can run them.
#pragma once

#include "kernels/kernel_set.h"

namespace grove {

extern const KernelSet kScalarKernels;
extern const KernelSet kAvx2Kernels;
extern const KernelSet kAvx512Kernels;

}  // namespace grove
