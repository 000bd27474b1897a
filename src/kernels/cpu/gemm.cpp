// Row-major Eigen maps over the raw buffers; the transposes are Eigen views, never copies.
#include "kernels/cpu/gemm.h"

#include <Eigen/Core>

namespace mpitron::kernels::cpu {
namespace {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// C = alpha A B + beta C for any Eigen expressions A and B.
template <class C, class A, class B, class T>
void multiply(C& out, const A& lhs, const B& rhs, T alpha, T beta) {
  if (beta == T(0)) {
    out.noalias() = alpha * lhs * rhs;
  } else {
    out *= beta;
    out.noalias() += alpha * lhs * rhs;
  }
}

}  // namespace

template <class T>
void Gemm::gemm_batched(bool trans_a, bool trans_b, std::size_t batch, std::size_t m, std::size_t n,
                        std::size_t k, T alpha, const T* a, std::size_t stride_a, const T* b,
                        std::size_t stride_b, T beta, T* c, std::size_t stride_c) {
  using Index = Eigen::Index;
  const auto rows_a = static_cast<Index>(trans_a ? k : m);
  const auto cols_a = static_cast<Index>(trans_a ? m : k);
  const auto rows_b = static_cast<Index>(trans_b ? n : k);
  const auto cols_b = static_cast<Index>(trans_b ? k : n);
  for (std::size_t i = 0; i < batch; ++i) {
    Eigen::Map<const RowMajor<T>> ma(a + i * stride_a, rows_a, cols_a);
    Eigen::Map<const RowMajor<T>> mb(b + i * stride_b, rows_b, cols_b);
    Eigen::Map<RowMajor<T>> mc(c + i * stride_c, static_cast<Index>(m), static_cast<Index>(n));
    if (trans_a && trans_b) {
      multiply(mc, ma.transpose(), mb.transpose(), alpha, beta);
    } else if (trans_a) {
      multiply(mc, ma.transpose(), mb, alpha, beta);
    } else if (trans_b) {
      multiply(mc, ma, mb.transpose(), alpha, beta);
    } else {
      multiply(mc, ma, mb, alpha, beta);
    }
  }
}

template void Gemm::gemm_batched<float>(bool, bool, std::size_t, std::size_t, std::size_t,
                                        std::size_t, float, const float*, std::size_t, const float*,
                                        std::size_t, float, float*, std::size_t);
template void Gemm::gemm_batched<double>(bool, bool, std::size_t, std::size_t, std::size_t,
                                         std::size_t, double, const double*, std::size_t,
                                         const double*, std::size_t, double, double*, std::size_t);

}  // namespace mpitron::kernels::cpu
