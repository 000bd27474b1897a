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
#include "kernels/cpu/packed_gemm_bf16.h"
#include "kernels/fault_injection.h"
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

// At more than one thread, each product is cut into a grid of tiles, and the threads take tiles,
// each one single-threaded provider call. Tiles give the bits of the one-thread calls because
// every provider sums each element's k terms in an order set by k alone: none splits k by the
// thread count here (Eigen's own threads would: its k blocking depends on them). What a tile
// must keep to meet the same micro-kernels as in one call:
// - rows in multiples of kTileRows: 48 is a multiple of the rows of every micro-kernel of
//   Eigen's (3 vectors: 48 floats with AVX-512, 24 with AVX2) and of OpenBLAS's;
// - columns in multiples of kTileColumns, or of Eigen's panels (kPanelColumns, which it takes
//   one call each at any thread count), where the provider allows a cut (column_step);
// - at least kMinTileWork multiply-adds: OpenBLAS picks other kernels for small calls (below
//   about 10^6 multiply-adds here) and for one-column ones, which round differently; a last row
//   or column tile below half the others joins the one before it.
// mpitron's packed GEMM gives any block of a product the whole call's bits (packed_gemm.h).
// Each tile packs its rows of op(A) and its columns of op(B) again, so the grid has as few tiles
// as the threads need, shaped to make rows + columns per tile (what it packs per k) least: where
// columns may be cut (column_step), a [1024, 2048] product is two column halves at 2 threads;
// before, it was 21 tiles of 48 rows that each packed all of op(B) (30 % of a 2-thread MLP step
// in OpenBLAS's copy routines).
// tests/kernels/test_threads.cpp checks the bits for every provider.
constexpr std::size_t kTileRows = 48;
constexpr std::size_t kTileColumns = 64;
constexpr std::size_t kMinTileWork = std::size_t{1} << 22;

struct Range {
  std::size_t begin, end;
};

// One dimension of the grid: `extent` cut into `count` parts of whole units of `step` (a last
// unit below half a step joins the one before it), as even as whole units allow.
struct Cut {
  std::size_t extent, step, units, count;

  static Cut of(std::size_t extent, std::size_t parts, std::size_t step) {
    const std::size_t full = extent / step;
    const std::size_t units = full == 0 ? 1 : full + (extent % step >= step / 2 ? 1 : 0);
    return {extent, step, units, std::min(parts, units)};
  }

  std::size_t begin(std::size_t i) const { return i == count ? extent : i * units / count * step; }
  Range part(std::size_t i) const { return {begin(i), begin(i + 1)}; }
  // Parts before the last have units / count whole units or one more; the last holds the rest.
  std::size_t last() const { return extent - begin(count - 1); }
  std::size_t largest() const {
    return count == 1 ? extent : std::max((units + count - 1) / count * step, last());
  }
  std::size_t smallest() const {
    return count == 1 ? extent : std::min(units / count * step, last());
  }
};

// Where a product's columns may be cut: at Eigen's panels, and anywhere for mpitron's packed GEMM
// in float32 (multiples of kTileColumns keep its micro-tiles whole). OpenBLAS keeps whole rows:
// a column tile took other bits than the whole call with its Haswell and Zen kernels in float32
// (at multiples of 64 columns too) and with its SkylakeX ones in float64 (2026-12-04, forced
// by OPENBLAS_CORETYPE); so does float64 under mpitron (Eigen in one call).
template <class T>
std::size_t column_step(GemmProvider provider, std::size_t n) {
  if (provider == GemmProvider::eigen) return kPanelColumns;
  if (provider == GemmProvider::mpitron && std::is_same_v<T, float>) return kTileColumns;
  return std::max<std::size_t>(n, 1);
}

// The tiles of one [m, n] x k product for `wanted` of them at most: the most tiles of at least
// kMinTileWork multiply-adds, then the least rows + columns per tile. One tile when wanted is 1.
struct Grid {
  Cut rows, columns;

  static Grid of(std::size_t m, std::size_t n, std::size_t k, std::size_t wanted,
                 std::size_t column_step) {
    Grid best{Cut::of(m, 1, kTileRows), Cut::of(n, 1, column_step)};
    // No more tiles than kMinTileWork allows: the search then costs less than the product.
    wanted = std::min(wanted, std::max<std::size_t>(m * n * k / kMinTileWork, 1));
    for (std::size_t r = 1; r <= std::min(wanted, best.rows.units); ++r) {
      // For r row parts, the most column parts whose smallest tile keeps kMinTileWork.
      for (std::size_t c = std::min(wanted / r, best.columns.units); c >= 1; --c) {
        const Grid g{Cut::of(m, r, kTileRows), Cut::of(n, c, column_step)};
        if (g.tiles() > 1 && g.rows.smallest() * g.columns.smallest() * k < kMinTileWork) continue;
        if (g.tiles() > best.tiles() ||
            (g.tiles() == best.tiles() && g.rows.largest() + g.columns.largest() <
                                              best.rows.largest() + best.columns.largest())) {
          best = g;
        }
        break;
      }
    }
    return best;
  }

  std::size_t tiles() const { return rows.count * columns.count; }
};

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

  // The block C[rows, cols] as tile() calls: one, or one per panel of kPanelColumns for Eigen.
  void block(Range rows, Range cols, const T* a, const T* b, T* c, GemmProvider provider) const {
    if (provider != GemmProvider::eigen) {
      tile(rows, cols, a, b, c, provider);
      return;
    }
    for (std::size_t first = cols.begin; first < cols.end; first += kPanelColumns)
      tile(rows, {first, std::min(cols.end, first + kPanelColumns)}, a, b, c, provider);
  }

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

// run(t) for every tile t < tiles, on up to `threads` threads (dynamic schedule), or on the
// calling thread without an OpenMP region when one thread or tile.
template <class Run>
void run_tiles(std::size_t threads, std::size_t tiles, Run run) {
  if (threads == 1 || tiles <= 1) {
    for (std::size_t t = 0; t < tiles; ++t)
      run(t);
    return;
  }
  const auto count = static_cast<std::int64_t>(tiles);
#pragma omp parallel for num_threads(static_cast <int>(std::min <std::int64_t>(threads, count))) \
    schedule(dynamic)
  for (std::int64_t t = 0; t < count; ++t)
    run(static_cast<std::size_t>(t));
}

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
  const auto threads = static_cast<std::size_t>(cpu_threads());
  // Products of a batch go to the threads whole while there are enough of them.
  const std::size_t wanted = batch == 0 ? 1 : (threads + batch - 1) / batch;
  const Grid grid = Grid::of(m, n, k, wanted, column_step<T>(provider, n));
  run_tiles(threads, batch * grid.tiles(), [&](std::size_t t) {
    const std::size_t i = t / grid.tiles(), tile = t % grid.tiles();
    product.block(grid.rows.part(tile / grid.columns.count),
                  grid.columns.part(tile % grid.columns.count), a + i * stride_a, b + i * stride_b,
                  c + i * stride_c, provider);
  });
}

template <class Out>
void Gemm::gemm_bf16(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                     float alpha, const bf16* a, const bf16* b, float beta, Out* c) {
  if (fault_active(Fault::bf16_gemm_overwrites)) beta = 0.0f;
  const Bf16Kernel kernel = chosen_bf16_kernel();
  const auto threads = static_cast<std::size_t>(cpu_threads());
  const Grid grid = Grid::of(m, n, k, threads, kTileColumns);
  const std::size_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  run_tiles(threads, grid.tiles(), [&](std::size_t t) {
    const Range rows = grid.rows.part(t / grid.columns.count);
    const Range cols = grid.columns.part(t % grid.columns.count);
    packed_gemm_bf16(kernel, trans_a, trans_b, rows.end - rows.begin, cols.end - cols.begin, k,
                     alpha, a + (trans_a ? rows.begin : rows.begin * k), lda,
                     b + (trans_b ? cols.begin * k : cols.begin), ldb, beta,
                     c + rows.begin * n + cols.begin, n);
  });
}

template void Gemm::gemm_batched<float>(bool, bool, std::size_t, std::size_t, std::size_t,
                                        std::size_t, float, const float*, std::size_t, const float*,
                                        std::size_t, float, float*, std::size_t);
template void Gemm::gemm_batched<double>(bool, bool, std::size_t, std::size_t, std::size_t,
                                         std::size_t, double, const double*, std::size_t,
                                         const double*, std::size_t, double, double*, std::size_t);
template void Gemm::gemm_bf16<float>(bool, bool, std::size_t, std::size_t, std::size_t, float,
                                     const bf16*, const bf16*, float, float*);
template void Gemm::gemm_bf16<bf16>(bool, bool, std::size_t, std::size_t, std::size_t, float,
                                    const bf16*, const bf16*, float, bf16*);

}  // namespace mpitron::kernels::cpu

namespace mpitron::kernels {

bool gemm_blas_available() {
  return MPITRON_HAVE_BLAS != 0;
}

std::string gemm_blas_kernel() {
#if MPITRON_HAVE_BLAS
  const char* name = openblas_get_corename();
  return name != nullptr ? std::string(name) : std::string();
#else
  return "";
#endif
}

GemmProvider fixed_gemm_provider() {
  if (cpu_threads() > 1) return GemmProvider::mpitron;
  return gemm_blas_available() ? GemmProvider::blas : GemmProvider::eigen;
}

namespace {

// Auto's measured provider and the thread count it holds for (0: none installed).
struct AutoProvider {
  GemmProvider provider = GemmProvider::eigen;
  int threads = 0;
};

AutoProvider& auto_provider() {
  static AutoProvider state;
  return state;
}

}  // namespace

void set_auto_gemm_provider(GemmProvider provider, int threads) {
  if (provider == GemmProvider::blas && !gemm_blas_available()) {
    throw std::invalid_argument("the blas GEMM is not in this build (no libopenblas-dev)");
  }
  if (threads < 1 || threads > kMaxCpuThreads) {
    throw std::invalid_argument("auto's GEMM provider needs a thread count in [1, " +
                                std::to_string(kMaxCpuThreads) + "], got " +
                                std::to_string(threads));
  }
  auto_provider() = {provider, threads};
}

GemmProvider default_gemm_provider() {
  const AutoProvider& measured = auto_provider();
  if (measured.threads == cpu_threads()) return measured.provider;
  return fixed_gemm_provider();
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

GemmProvider gemm_provider_for(DType dtype) {
  const GemmProvider provider = gemm_provider();
  return provider == GemmProvider::mpitron && dtype == DType::f64 ? GemmProvider::eigen : provider;
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

namespace {

Bf16GemmPath chosen_bf16_gemm_path() {
  const bool has = cpu::cpu_has_avx512_bf16();
  const char* variable = std::getenv("MPITRON_BF16_GEMM");
  const std::string chosen = variable != nullptr && *variable != '\0' ? variable : "auto";
  if (chosen == "auto") return has ? Bf16GemmPath::avx512bf16 : Bf16GemmPath::convert_at_pack;
  if (chosen == "convert-at-pack") return Bf16GemmPath::convert_at_pack;
  if (chosen != "avx512bf16") {
    throw std::invalid_argument("MPITRON_BF16_GEMM '" + chosen +
                                "' is not one of: auto, avx512bf16, convert-at-pack");
  }
  if (!has) {
    throw std::invalid_argument(
        "MPITRON_BF16_GEMM avx512bf16: this CPU has no AVX512-BF16 (no avx512_bf16 in its "
        "flags)");
  }
  return Bf16GemmPath::avx512bf16;
}

}  // namespace

Bf16GemmPath bf16_gemm_path() {
  static const Bf16GemmPath path = chosen_bf16_gemm_path();
  return path;
}

std::string to_string(Bf16GemmPath path) {
  return path == Bf16GemmPath::avx512bf16 ? "avx512bf16" : "convert-at-pack fp32";
}

}  // namespace mpitron::kernels
