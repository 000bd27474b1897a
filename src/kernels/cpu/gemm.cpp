// Row-major Eigen maps over the raw buffers (the transposes are Eigen views, never copies), or
// the same product through CBLAS when the BLAS provider is chosen.
#include "kernels/cpu/gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/ops.h"

#if MPITRON_HAVE_BLAS
#include <cblas.h>
#endif

namespace mpitron::kernels::cpu {
namespace {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// C is computed in panels of at most this many columns. Eigen packs kc x (columns of C) of op(B)
// into a temporary it mallocs and frees on every call (kc <= ~700 for float here); a panel keeps
// that under 1.4 MiB of float32 where a [1024, 2048] result took 4 MiB, which glibc then keeps
// resident (measured: 4 MiB less peak RSS in bench at its default sizes, about 3 % more time).
constexpr std::size_t kPanelColumns = 512;

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

// The provider, first read from MPITRON_GEMM; OpenBLAS's own thread pool (all cores by default)
// is set to cpu_threads() before its first GEMM.
GemmProvider& provider_state() {
  static GemmProvider provider = [] {
    set_blas_threads(cpu_threads());
    const char* text = std::getenv("MPITRON_GEMM");
    return text == nullptr || *text == '\0' ? default_gemm_provider() : parse_gemm_provider(text);
  }();
  return provider;
}

#if MPITRON_HAVE_BLAS
// CBLAS wants every leading dimension >= 1, also for empty matrices.
int leading(int columns) {
  return std::max(columns, 1);
}

void blas_gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
               const float* b, float beta, float* c) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, leading(trans_a ? m : k), b,
              leading(trans_b ? k : n), beta, c, leading(n));
}

void blas_gemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const double* a,
               const double* b, double beta, double* c) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, leading(trans_a ? m : k), b,
              leading(trans_b ? k : n), beta, c, leading(n));
}
#endif

}  // namespace

void set_blas_threads(int threads) {
#if MPITRON_HAVE_BLAS
  openblas_set_num_threads(threads);
#else
  (void)threads;
#endif
}

template <class T>
void Gemm::gemm_batched(bool trans_a, bool trans_b, std::size_t batch, std::size_t m, std::size_t n,
                        std::size_t k, T alpha, const T* a, std::size_t stride_a, const T* b,
                        std::size_t stride_b, T beta, T* c, std::size_t stride_c) {
#if MPITRON_HAVE_BLAS
  if (gemm_provider() == GemmProvider::blas) {
    for (std::size_t i = 0; i < batch; ++i) {
      blas_gemm(trans_a, trans_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                alpha, a + i * stride_a, b + i * stride_b, beta, c + i * stride_c);
    }
    return;
  }
#endif
  using Index = Eigen::Index;
  using Strided = Eigen::OuterStride<>;
  const auto rows_a = static_cast<Index>(trans_a ? k : m);
  const auto cols_a = static_cast<Index>(trans_a ? m : k);
  for (std::size_t i = 0; i < batch; ++i) {
    Eigen::Map<const RowMajor<T>> ma(a + i * stride_a, rows_a, cols_a);
    for (std::size_t first = 0; first < n; first += kPanelColumns) {
      const auto cols = static_cast<Index>(std::min(kPanelColumns, n - first));
      Eigen::Map<RowMajor<T>, 0, Strided> mc(c + i * stride_c + first, static_cast<Index>(m), cols,
                                             Strided(static_cast<Index>(n)));
      if (trans_b) {
        Eigen::Map<const RowMajor<T>, 0, Strided> mb(b + i * stride_b + first * k, cols,
                                                     static_cast<Index>(k),
                                                     Strided(static_cast<Index>(k)));
        if (trans_a) {
          multiply(mc, ma.transpose(), mb.transpose(), alpha, beta);
        } else {
          multiply(mc, ma, mb.transpose(), alpha, beta);
        }
      } else {
        Eigen::Map<const RowMajor<T>, 0, Strided> mb(
            b + i * stride_b + first, static_cast<Index>(k), cols, Strided(static_cast<Index>(n)));
        if (trans_a) {
          multiply(mc, ma.transpose(), mb, alpha, beta);
        } else {
          multiply(mc, ma, mb, alpha, beta);
        }
      }
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

namespace mpitron::kernels {

bool gemm_blas_available() {
  return MPITRON_HAVE_BLAS != 0;
}

GemmProvider default_gemm_provider() {
  return gemm_blas_available() ? GemmProvider::blas : GemmProvider::eigen;
}

void set_gemm_provider(GemmProvider provider) {
  if (provider == GemmProvider::blas && !gemm_blas_available()) {
    throw std::invalid_argument("the blas GEMM is not in this build (no libopenblas-dev)");
  }
  cpu::provider_state() = provider;
  cpu::set_blas_threads(cpu_threads());
}

GemmProvider gemm_provider() {
  return cpu::provider_state();
}

std::string to_string(GemmProvider provider) {
  return provider == GemmProvider::blas ? "blas" : "eigen";
}

GemmProvider parse_gemm_provider(const std::string& text) {
  if (text == "auto") return default_gemm_provider();
  if (text == "eigen") return GemmProvider::eigen;
  if (text == "blas") {
    if (!gemm_blas_available()) {
      throw std::invalid_argument("the blas GEMM is not in this build (no libopenblas-dev)");
    }
    return GemmProvider::blas;
  }
  throw std::invalid_argument("GEMM provider '" + text + "' is not one of: auto, eigen, blas");
}

}  // namespace mpitron::kernels
