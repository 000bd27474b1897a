// Row-major Eigen maps over the raw buffers (the transposes are Eigen views, never copies), or
// the same product through CBLAS or mpitron's packed GEMM when that provider is chosen.
#include "kernels/cpu/gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cpu/packed_gemm.h"
#include "kernels/ops.h"

#if MPITRON_HAVE_BLAS
#include <cblas.h>
#endif

namespace mpitron::kernels::cpu {
namespace {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// At one thread, Eigen computes C in panels of at most this many columns. Eigen packs kc x
// (columns of C) of op(B) into a temporary it mallocs and frees on every call (kc <= ~700 for
// float here); a panel keeps that under 1.4 MiB of float32 where a [1024, 2048] result took
// 4 MiB, which glibc then keeps resident (measured: 4 MiB less peak RSS in bench at its default
// sizes, about 3 % more time). OpenBLAS and mpitron's packed GEMM take the whole product in one
// call.
constexpr std::size_t kPanelColumns = 512;

// At more than one thread, each product is cut into tiles of `height` rows (the last tile takes
// a remainder below height / 2 with it) by Eigen's column panels (the others: all columns), a
// rule that depends only on the sizes; the threads take tiles, and each tile is one
// single-threaded provider call. Tiles give the bits of the one-thread calls because both
// providers sum every element's k terms in an order set by k alone: neither splits k by the
// thread count here (Eigen's own threads would: its k blocking depends on them), and a height
// that is a multiple of 48 rows is a multiple of the rows of every micro-kernel of Eigen's
// (3 vectors: 48 floats with AVX-512, 24 with AVX2), so rows meet the same micro-kernels as in
// one call. (48 rather than 96: a 512-row product is then 10 tiles, 5 per thread at 2 threads,
// where 96 made 5, 3 and 2.) OpenBLAS picks other kernels for small calls (below about 10^6
// multiply-adds here) and for one-column ones, which round differently: hence tiles of at least
// kMinTileWork multiply-adds, so that a tile and its whole product take the same kernel, and whole
// rows. mpitron's packed GEMM gives any block of a product the whole call's bits (packed_gemm.h).
// tests/kernels/test_threads.cpp checks the bits for every provider.
constexpr std::size_t kTileRows = 48;
constexpr std::size_t kMinTileWork = std::size_t{1} << 22;

// Rows per tile of an [m, n] x k product: the least multiple of kTileRows with at least
// kMinTileWork multiply-adds.
std::size_t tile_height(std::size_t n, std::size_t k) {
  const std::size_t per_row = std::max<std::size_t>(n * k, 1);
  const std::size_t rows = (kMinTileWork + per_row - 1) / per_row;
  return (rows + kTileRows - 1) / kTileRows * kTileRows;
}

std::size_t tile_count(std::size_t m, std::size_t height) {
  const std::size_t full = m / height;
  return full == 0 ? 1 : full + (m % height >= height / 2 ? 1 : 0);
}

struct Range {
  std::size_t begin, end;
};

// Rows of row tile `tile` of `count` tiles of `height` over `m` rows (the last takes the rest).
Range tile_rows(std::size_t m, std::size_t height, std::size_t count, std::size_t tile) {
  const std::size_t begin = tile * height;
  return {begin, tile + 1 == count ? m : begin + height};
}

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

#if MPITRON_HAVE_BLAS
// CBLAS wants every leading dimension >= 1, also for empty matrices.
int leading(std::size_t columns) {
  return std::max(static_cast<int>(columns), 1);
}

void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
               const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha,
               const double* a, int lda, const double* b, int ldb, double beta, double* c,
               int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
#endif

// One product C[m, n] = alpha op(A) op(B) + beta C (gemm.h's layout) and its tiles.
template <class T>
struct Product {
  bool trans_a, trans_b;
  std::size_t m, n, k;
  T alpha, beta;

  // C[rows, cols] = alpha op(A)[rows, :] op(B)[:, cols] + beta C[rows, cols], one thread,
  // through CBLAS, mpitron's packed GEMM (float32) or Eigen.
  void tile(Range rows, Range cols, const T* a, const T* b, T* c, GemmProvider provider) const {
    const std::size_t height = rows.end - rows.begin, width = cols.end - cols.begin;
    const T* a_rows = a + (trans_a ? rows.begin : rows.begin * k);
    const T* b_cols = b + (trans_b ? cols.begin * k : cols.begin);
    T* c_tile = c + rows.begin * n + cols.begin;
    const std::size_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
    if constexpr (std::is_same_v<T, float>) {
      if (provider == GemmProvider::mpitron) {
        packed_sgemm(trans_a, trans_b, height, width, k, alpha, a_rows, lda, b_cols, ldb, beta,
                     c_tile, n);
        return;
      }
    }
#if MPITRON_HAVE_BLAS
    if (provider == GemmProvider::blas) {
      blas_gemm(trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                static_cast<int>(height), static_cast<int>(width), static_cast<int>(k), alpha,
                a_rows, leading(lda), b_cols, leading(ldb), beta, c_tile, leading(n));
      return;
    }
#endif
    using Index = Eigen::Index;
    using Strided = Eigen::OuterStride<>;
    const auto ix = [](std::size_t v) { return static_cast<Index>(v); };
    Eigen::Map<RowMajor<T>, 0, Strided> mc(c_tile, ix(height), ix(width), Strided(ix(n)));
    Eigen::Map<const RowMajor<T>, 0, Strided> ma(a_rows, ix(trans_a ? k : height),
                                                 ix(trans_a ? height : k), Strided(ix(lda)));
    Eigen::Map<const RowMajor<T>, 0, Strided> mb(b_cols, ix(trans_b ? width : k),
                                                 ix(trans_b ? k : width), Strided(ix(ldb)));
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
};

// The provider, first read from MPITRON_GEMM. (Every GEMM asks cpu_threads() before calling a
// provider, which sets the providers' own thread counts to 1 first: threads.cpp.)
GemmProvider& provider_state() {
  static GemmProvider provider = [] {
    const char* text = std::getenv("MPITRON_GEMM");
    return text == nullptr || *text == '\0' ? default_gemm_provider() : parse_gemm_provider(text);
  }();
  return provider;
}

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
  const Product<T> product{trans_a, trans_b, m, n, k, alpha, beta};
  const GemmProvider provider = gemm_provider();
  const bool panels = provider == GemmProvider::eigen;  // the others take all columns at once
  if (cpu_threads() == 1) {  // the calls of one thread, without an OpenMP region
    for (std::size_t i = 0; i < batch; ++i) {
      const T* ai = a + i * stride_a;
      const T* bi = b + i * stride_b;
      T* ci = c + i * stride_c;
      if (!panels) {
        product.tile({0, m}, {0, n}, ai, bi, ci, provider);
      } else {
        for (std::size_t first = 0; first < n; first += kPanelColumns)
          product.tile({0, m}, {first, std::min(n, first + kPanelColumns)}, ai, bi, ci, provider);
      }
    }
    return;
  }
  const std::size_t height = tile_height(n, k);
  const std::size_t row_tiles = tile_count(m, height);
  const std::size_t panel = panels ? kPanelColumns : std::max<std::size_t>(n, 1);
  const std::size_t col_tiles = (n + panel - 1) / panel;
  const auto tiles = static_cast<std::int64_t>(batch * row_tiles * col_tiles);
#pragma omp parallel for num_threads( \
    static_cast <int>(std::min <std::int64_t>(cpu_threads(), tiles))) schedule(dynamic)
  for (std::int64_t t = 0; t < tiles; ++t) {
    const auto index = static_cast<std::size_t>(t);
    const std::size_t i = index / (row_tiles * col_tiles);
    const std::size_t row_tile = index / col_tiles % row_tiles;
    const std::size_t first = index % col_tiles * panel;
    product.tile(tile_rows(m, height, row_tiles, row_tile), {first, std::min(n, first + panel)},
                 a + i * stride_a, b + i * stride_b, c + i * stride_c, provider);
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
}

GemmProvider gemm_provider() {
  return cpu::provider_state();
}

std::string to_string(GemmProvider provider) {
  switch (provider) {
    case GemmProvider::blas:
      return "blas";
    case GemmProvider::mpitron:
      return "mpitron";
    case GemmProvider::eigen:
      break;
  }
  return "eigen";
}

GemmProvider parse_gemm_provider(const std::string& text) {
  if (text == "auto") return default_gemm_provider();
  if (text == "eigen") return GemmProvider::eigen;
  if (text == "mpitron") return GemmProvider::mpitron;
  if (text == "blas") {
    if (!gemm_blas_available()) {
      throw std::invalid_argument("the blas GEMM is not in this build (no libopenblas-dev)");
    }
    return GemmProvider::blas;
  }
  throw std::invalid_argument("GEMM provider '" + text +
                              "' is not one of: auto, eigen, blas, mpitron");
}

}  // namespace mpitron::kernels
