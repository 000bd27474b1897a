// CPU GEMM through Eigen or a BLAS.
#pragma once

#include <cstddef>

#include "kernels/bf16.h"

namespace mpitron::kernels::cpu {

/// `batch` row-major products C_i[m, n] = alpha op(A_i) op(B_i) + beta C_i with A_i at
/// a + i * stride_a (stored [m, k], or [k, m] when trans_a), B_i at b + i * stride_b (stored
/// [k, n], or [n, k] when trans_b) and C_i at c + i * stride_c. beta = 0 never reads C.
/// Eigen's blocked GEMM or CBLAS (kernels::gemm_provider()). At cpu_threads() > 1 the products
/// are cut into tiles by a rule of the sizes alone and the threads compute tiles with the
/// single-threaded provider, so C has the same bits for any thread count (gemm.cpp). Defined
/// for T = float and double.
struct Gemm {
  template <class T>
  static void gemm_batched(bool trans_a, bool trans_b, std::size_t batch, std::size_t m,
                           std::size_t n, std::size_t k, T alpha, const T* a, std::size_t stride_a,
                           const T* b, std::size_t stride_b, T beta, T* c, std::size_t stride_c);

  /// Row-major C[m, n] = alpha op(A) op(B) + beta C with bfloat16 A and B (stored as in
  /// gemm_batched) and Out = float or bf16 (kernels::gemm_bf16), by mpitron's packed bfloat16
  /// GEMM on bf16_gemm_path()'s kernel whatever the provider; at cpu_threads() > 1 cut into the
  /// tiles of a float32 product of the same sizes under the mpitron provider, so C has the same
  /// bits for any thread count.
  template <class Out>
  static void gemm_bf16(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                        float alpha, const bf16* a, const bf16* b, float beta, Out* c);
};

/// Sets the BLAS provider's own thread count (OpenBLAS keeps a thread pool of its own; mpitron
/// keeps it at 1 and threads over tiles instead); nothing in a build without BLAS.
void set_blas_threads(int threads);

}  // namespace mpitron::kernels::cpu
