// How the kernels were built, for `mpitron --version` and bug reports, and what one core can do.
#pragma once

#include <string>

namespace mpitron::kernels {

/// The CPU vector extensions the CPU kernels (Eigen GEMM and the element-wise loops) were compiled
/// for, from the compiler's predefined macros, widest first, e.g. "AVX2 FMA AVX SSE4.2 SSE2" (see
/// MPITRON_CPU_AVX2), "SSE2" for baseline x86-64, "NEON" on Arm, or "none".
std::string cpu_vector_extensions();

/// One core's FP32 multiply-add peak in GFLOP/s, measured for `seconds` (the best of repeated
/// runs of independent vector FMAs as wide as the kernels were compiled for: 16 lanes with
/// AVX-512, 8 with AVX2, 4 otherwise). Other ranks or threads on the core lower it.
double cpu_fma_peak_gflops(double seconds);

/// One core's bfloat16 dot-product peak in GFLOP/s (VDPBF16PS: per float32 lane, two bfloat16
/// products added to the lane, 4 FLOP), measured for `seconds` as cpu_fma_peak_gflops is, with
/// 16 independent chains; 0 on a CPU without AVX512-BF16. Other ranks or threads on the core
/// lower it.
double cpu_bf16_dot_peak_gflops(double seconds);

}  // namespace mpitron::kernels
