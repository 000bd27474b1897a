// How the kernels were built, for `mpitron --version` and bug reports.
#pragma once

#include <string>

namespace mpitron::kernels {

/// The CPU vector extensions the CPU kernels (Eigen GEMM and the element-wise loops) were compiled
/// for, from the compiler's predefined macros, widest first, e.g. "AVX2 FMA AVX SSE4.2 SSE2" (see
/// MPITRON_CPU_AVX2), "SSE2" for baseline x86-64, "NEON" on Arm, or "none".
std::string cpu_vector_extensions();

}  // namespace mpitron::kernels
