// CPU GEMM through Eigen or a BLAS.
#pragma once

#include <cstddef>

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
};

/// Sets the BLAS provider's own thread count (OpenBLAS keeps a thread pool of its own; mpitron
/// keeps it at 1 and threads over tiles instead); nothing in a build without BLAS.
void set_blas_threads(int threads);

}  // namespace mpitron::kernels::cpu
