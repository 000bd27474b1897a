// Row-major GEMM on cuBLAS. cuBLAS is column-major, and a row-major [r, c] matrix is the same
// memory as a column-major [c, r] one, i.e. its transpose. So C = op(A) op(B) row-major is
// computed as the column-major C^T = op(B)^T op(A)^T: swap A and B, keep the op flags, and pass
// the leading dimensions of the stored (row-major) matrices.
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/check.h"
#include "kernels/cuda/kernels.h"

namespace mpitron::kernels::cuda {
namespace {

/// The process's cuBLAS handle, created on first use and kept until exit. It runs on the
/// default stream, in order with mpitron's kernels.
cublasHandle_t handle() {
  static const cublasHandle_t instance = [] {
    cublasHandle_t created = nullptr;
    MPITRON_CUDA_CHECK(cublasCreate(&created));
    return created;
  }();
  return instance;
}

template <class Int>
Int narrow(std::size_t value, const char* what) {
  if (value > static_cast<std::size_t>(std::numeric_limits<Int>::max())) {
    throw std::invalid_argument(std::string("kernels::gemm: ") + what + " = " +
                                std::to_string(value) + " exceeds cuBLAS's integer range");
  }
  return static_cast<Int>(value);
}

cublasStatus_t gemm_call(cublasOperation_t op_b, cublasOperation_t op_a, int n, int m, int k,
                         const float* alpha, const float* b, int ldb, long long stride_b,
                         const float* a, int lda, long long stride_a, const float* beta, float* c,
                         int ldc, long long stride_c, int batch) {
  return cublasSgemmStridedBatched(handle(), op_b, op_a, n, m, k, alpha, b, ldb, stride_b, a, lda,
                                   stride_a, beta, c, ldc, stride_c, batch);
}

cublasStatus_t gemm_call(cublasOperation_t op_b, cublasOperation_t op_a, int n, int m, int k,
                         const double* alpha, const double* b, int ldb, long long stride_b,
                         const double* a, int lda, long long stride_a, const double* beta,
                         double* c, int ldc, long long stride_c, int batch) {
  return cublasDgemmStridedBatched(handle(), op_b, op_a, n, m, k, alpha, b, ldb, stride_b, a, lda,
                                   stride_a, beta, c, ldc, stride_c, batch);
}

}  // namespace

template <class T>
void Kernels::gemm_batched(bool trans_a, bool trans_b, std::size_t batch, std::size_t m,
                           std::size_t n, std::size_t k, T alpha, const T* a, std::size_t stride_a,
                           const T* b, std::size_t stride_b, T beta, T* c, std::size_t stride_c) {
  // Leading dimensions of the stored row-major matrices (at least 1, as cuBLAS requires).
  const std::size_t lda = std::max<std::size_t>(trans_a ? m : k, 1);
  const std::size_t ldb = std::max<std::size_t>(trans_b ? k : n, 1);
  MPITRON_CUDA_CHECK(gemm_call(
      trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, narrow<int>(n, "n"),
      narrow<int>(m, "m"), narrow<int>(k, "k"), &alpha, b, narrow<int>(ldb, "ldb"),
      narrow<long long>(stride_b, "stride_b"), a, narrow<int>(lda, "lda"),
      narrow<long long>(stride_a, "stride_a"), &beta, c, narrow<int>(n, "n"),
      narrow<long long>(stride_c, "stride_c"), narrow<int>(batch, "batch")));
}

// The same transpose identity through cublasGemmEx: C^T = op(B)^T op(A)^T, A and B CUDA_R_16BF,
// C CUDA_R_32F or CUDA_R_16BF, products summed in float32 (CUBLAS_COMPUTE_32F; cuBLAS rounds a
// bfloat16 C once, from its float32 result).
template <class Out>
void Kernels::gemm_bf16(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                        float alpha, const bf16* a, const bf16* b, float beta, Out* c) {
  const std::size_t lda = std::max<std::size_t>(trans_a ? m : k, 1);
  const std::size_t ldb = std::max<std::size_t>(trans_b ? k : n, 1);
  const cudaDataType_t c_type = std::is_same_v<Out, bf16> ? CUDA_R_16BF : CUDA_R_32F;
  MPITRON_CUDA_CHECK(cublasGemmEx(
      handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      narrow<int>(n, "n"), narrow<int>(m, "m"), narrow<int>(k, "k"), &alpha, b, CUDA_R_16BF,
      narrow<int>(ldb, "ldb"), a, CUDA_R_16BF, narrow<int>(lda, "lda"), &beta, c, c_type,
      narrow<int>(n, "n"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

template void Kernels::gemm_bf16<float>(bool, bool, std::size_t, std::size_t, std::size_t, float,
                                        const bf16*, const bf16*, float, float*);
template void Kernels::gemm_bf16<bf16>(bool, bool, std::size_t, std::size_t, std::size_t, float,
                                       const bf16*, const bf16*, float, bf16*);

template void Kernels::gemm_batched<float>(bool, bool, std::size_t, std::size_t, std::size_t,
                                           std::size_t, float, const float*, std::size_t,
                                           const float*, std::size_t, float, float*, std::size_t);
template void Kernels::gemm_batched<double>(bool, bool, std::size_t, std::size_t, std::size_t,
                                            std::size_t, double, const double*, std::size_t,
                                            const double*, std::size_t, double, double*,
                                            std::size_t);

}  // namespace mpitron::kernels::cuda
