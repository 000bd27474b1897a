// LayerNorm and the embedding gather/scatter against naive double loops written here.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernel_test_support.h"

namespace mpitron::test {
using namespace ::mpitron::kernels;
namespace {

using ModelKernelTest = KernelTest;
MPITRON_KERNEL_TEST_SUITE(ModelKernelTest);

struct LayerNormReference {
  std::vector<double> y, xhat, rstd, dx, dweight, dbias;
};

// Straight from the definition, in long double (so float64 kernels are compared with a reference
// that is more accurate than they are): xhat = (x - mean) / sqrt(var + eps), y = xhat w + b; the
// backward by the full Jacobian d xhat_j / d x_k = rstd (delta_jk - 1/C - xhat_j xhat_k / C).
LayerNormReference layer_norm_reference(const std::vector<double>& x, const std::vector<double>& w,
                                        const std::vector<double>& b, const std::vector<double>& dy,
                                        double eps) {
  using Wide = long double;
  const std::size_t cols = w.size(), rows = x.size() / cols;
  const Wide n = static_cast<Wide>(cols);
  LayerNormReference ref{std::vector<double>(x.size()), std::vector<double>(x.size()),
                         std::vector<double>(rows),     std::vector<double>(x.size()),
                         std::vector<double>(cols),     std::vector<double>(cols)};
  std::vector<Wide> dweight(cols, 0.0L), dbias(cols, 0.0L);
  for (std::size_t r = 0; r < rows; ++r) {
    Wide mean = 0.0L, var = 0.0L;
    for (std::size_t c = 0; c < cols; ++c)
      mean += x[r * cols + c];
    mean /= n;
    for (std::size_t c = 0; c < cols; ++c)
      var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
    const Wide rstd = 1.0L / std::sqrt(var / n + eps);
    ref.rstd[r] = static_cast<double>(rstd);
    std::vector<Wide> xhat(cols);
    for (std::size_t c = 0; c < cols; ++c) {
      xhat[c] = (x[r * cols + c] - mean) * rstd;
      ref.xhat[r * cols + c] = static_cast<double>(xhat[c]);
      ref.y[r * cols + c] = static_cast<double>(xhat[c] * w[c] + b[c]);
      dweight[c] += dy[r * cols + c] * xhat[c];
      dbias[c] += dy[r * cols + c];
    }
    for (std::size_t k = 0; k < cols; ++k) {
      Wide dx = 0.0L;
      for (std::size_t j = 0; j < cols; ++j) {
        const Wide jac = rstd * ((j == k ? 1.0L : 0.0L) - 1.0L / n - xhat[j] * xhat[k] / n);
        dx += dy[r * cols + j] * w[j] * jac;
      }
      ref.dx[r * cols + k] = static_cast<double>(dx);
    }
  }
  for (std::size_t c = 0; c < cols; ++c) {
    ref.dweight[c] = static_cast<double>(dweight[c]);
    ref.dbias[c] = static_cast<double>(dbias[c]);
  }
  return ref;
}

TEST_P(ModelKernelTest, LayerNormForwardAndBackwardMatchTheDefinition) {
  // cols 300 is wider than a CUDA block; the offset 50 makes the two-pass variance matter.
  for (const std::size_t cols : {std::size_t{7}, std::size_t{300}}) {
    SCOPED_TRACE(::testing::Message() << "cols " << cols);
    constexpr std::size_t rows = 5;
    constexpr double ln_eps = 1e-5;
    std::vector<double> x = random(rows * cols, 40, 48.0, 52.0);
    const std::vector<double> w = random(cols, 41), b = random(cols, 42);
    const std::vector<double> dy = random(rows * cols, 43);
    const LayerNormReference ref = layer_norm_reference(x, w, b, dy, ln_eps);
    const Buffer bx = make(x), bw = make(w);
    Buffer y = empty(x.size()), xhat = empty(x.size()), rstd = empty(rows);
    layer_norm_forward(bx, bw, make(b), cols, ln_eps, y, xhat, rstd);
    // |x| ~ 50 with a spread of ~1 (rstd ~ 0.9): storing the mean rounds it by 50 eps, which
    // shifts every xhat by ~45 eps; |w| < 2 doubles that in y and the gradients: 128 eps. In
    // float64 the kernel's double row sums add up to ~cols eps of |x| ~ 50 (the long double
    // reference does not); 2 cols eps covers them.
    const double tol = (128.0 + 2.0 * static_cast<double>(cols)) * eps();
    expect_close(host_values(y), ref.y, tol);
    expect_close(host_values(xhat), ref.xhat, tol);
    expect_close(host_values(rstd), ref.rstd, tol);
    Buffer dx = make(std::vector<double>(x.size(), 9.0)), dw = make(std::vector<double>(cols, 9.0));
    Buffer db = make(std::vector<double>(cols, 9.0));  // overwritten, not accumulated
    layer_norm_backward(xhat, bw, rstd, make(dy), cols, dx, dw, db);
    expect_close(host_values(dx), ref.dx, tol);
    expect_close(host_values(dw), ref.dweight, tol);
    expect_close(host_values(db), ref.dbias, 4 * rows * eps());
  }
}

// Train --bf16 keeps LayerNorm's xhat as bfloat16: the backward reading it is the float32
// backward's bits on the widened values.
TEST_P(ModelKernelTest, LayerNormBackwardReadsBfloat16Xhat) {
  if (dtype() != DType::f32) GTEST_SKIP() << "a bfloat16 xhat goes with float32 gradients";
  constexpr std::size_t rows = 4, cols = 300;
  const Buffer w = make(random(cols, 49)), b = make(random(cols, 50));
  const Buffer dy = make(random(rows * cols, 51));
  Buffer y = empty(rows * cols), xhat = empty(rows * cols), rstd = empty(rows);
  layer_norm_forward(make(random(rows * cols, 52)), w, b, cols, 1e-5, y, xhat, rstd);
  Buffer xhat16(rows * cols, DType::bf16, device()), xhat_widened = empty(rows * cols);
  convert(xhat, xhat16);
  convert(xhat16, xhat_widened);
  Buffer want_dx = empty(rows * cols), want_dw = empty(cols), want_db = empty(cols);
  Buffer dx = empty(rows * cols), dw = empty(cols), db = empty(cols);
  layer_norm_backward(xhat_widened, w, rstd, dy, cols, want_dx, want_dw, want_db);
  layer_norm_backward(xhat16, w, rstd, dy, cols, dx, dw, db);
  EXPECT_EQ(host_values(dx), host_values(want_dx));
  EXPECT_EQ(host_values(dw), host_values(want_dw));
  EXPECT_EQ(host_values(db), host_values(want_db));
  Buffer unrounded_dw = empty(cols);
  layer_norm_backward(xhat, w, rstd, dy, cols, want_dx, unrounded_dw, want_db);
  EXPECT_NE(host_values(dw), host_values(unrounded_dw)) << "xhat is rounded";
}

// Train --bf16 has the forward write xhat as bfloat16 directly: the bits of converting the float32
// call's xhat, and that call's y (computed from the unrounded xhat).
TEST_P(ModelKernelTest, LayerNormForwardWritesBfloat16XhatRoundedOnce) {
  if (dtype() != DType::f32) GTEST_SKIP() << "a bfloat16 xhat goes with float32 values";
  constexpr std::size_t rows = 5, cols = 300;
  const Buffer x = make(random(rows * cols, 53, -3.0, 3.0));
  const Buffer w = make(random(cols, 54)), b = make(random(cols, 55));
  Buffer want_y = empty(rows * cols), xhat = empty(rows * cols), want_rstd = empty(rows);
  layer_norm_forward(x, w, b, cols, 1e-5, want_y, xhat, want_rstd);
  Buffer want_xhat16(rows * cols, DType::bf16, device());
  convert(xhat, want_xhat16);
  Buffer y = empty(rows * cols), xhat16(rows * cols, DType::bf16, device()), rstd = empty(rows);
  layer_norm_forward(x, w, b, cols, 1e-5, y, xhat16, rstd);
  EXPECT_EQ(host_values(y), host_values(want_y));
  EXPECT_EQ(host_values(rstd), host_values(want_rstd));
  Buffer got = empty(rows * cols), want = empty(rows * cols);
  convert(xhat16, got);
  convert(want_xhat16, want);
  EXPECT_EQ(host_values(got), host_values(want));
  EXPECT_NE(host_values(got), host_values(xhat)) << "xhat is rounded";
}

// A slice of 4 rows [first_row, first_row + 4) of a 10-row table.
TEST_P(ModelKernelTest, EmbeddingGathersTheSliceAndZeroesOtherRows) {
  constexpr std::size_t cols = 3, rows = 4;
  const std::vector<double> weight = random(rows * cols, 44);
  for (const DType index_dtype : {DType::i32, DType::i64}) {
    for (const std::int64_t first_row : {std::int64_t{0}, std::int64_t{4}}) {
      SCOPED_TRACE(::testing::Message() << to_string(index_dtype) << " first_row " << first_row);
      const std::vector<std::int64_t> ids{4, 0, 7, 9, 5, 4, 3, 8};
      std::vector<double> want(ids.size() * cols, 0.0);
      for (std::size_t i = 0; i < ids.size(); ++i) {
        const std::int64_t local = ids[i] - first_row;
        if (local < 0 || local >= static_cast<std::int64_t>(rows)) continue;
        for (std::size_t c = 0; c < cols; ++c)
          want[i * cols + c] = weight[static_cast<std::size_t>(local) * cols + c];
      }
      Buffer out = make(std::vector<double>(want.size(), 9.0));
      embedding_forward(make(weight), cols, make_indices(ids, index_dtype), first_row, out);
      expect_close(host_values(out), want, 0.0);  // a copy: exact
    }
  }
}

TEST_P(ModelKernelTest, EmbeddingBackwardAccumulatesRepeatedIndicesInTheSlice) {
  constexpr std::size_t cols = 130, rows = 4;  // cols above one warp's width
  const std::vector<std::int64_t> ids{5, 5, 2, 6, 5, 11, 3, 6};
  const std::int64_t first_row = 3;
  const std::vector<double> dout = random(ids.size() * cols, 45);
  const std::vector<double> start = random(rows * cols, 46);
  std::vector<double> want = start;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t local = ids[i] - first_row;
    if (local < 0 || local >= static_cast<std::int64_t>(rows)) continue;
    for (std::size_t c = 0; c < cols; ++c)
      want[static_cast<std::size_t>(local) * cols + c] += dout[i * cols + c];
  }
  for (const DType index_dtype : {DType::i32, DType::i64}) {
    Buffer dweight = make(start);
    embedding_backward(make(dout), make_indices(ids, index_dtype), first_row, cols, dweight);
    // Up to 4 terms added (index 5 three times onto a start value): 4 roundings of O(6) sums.
    expect_close(host_values(dweight), want, 8 * eps());
  }
}

// Many tokens on few rows, over more than one tile of indices and one block of columns, with
// more rows than the CUDA kernel has groups (several rows per group) and a slice that drops some
// tokens: each element must be the naive loop's sum in the kernel's own precision, added in
// index order, to the bit, so a resumed or repeated run gives the same gradient on either device.
template <class T>
std::vector<double> embedding_scatter_in_order(const std::vector<double>& start,
                                               const std::vector<double>& dout,
                                               const std::vector<std::int64_t>& ids,
                                               std::int64_t first_row, std::size_t cols) {
  std::vector<T> sums(start.begin(), start.end());
  const auto rows = static_cast<std::int64_t>(start.size() / cols);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t local = ids[i] - first_row;
    if (local < 0 || local >= rows) continue;
    for (std::size_t c = 0; c < cols; ++c)
      sums[static_cast<std::size_t>(local) * cols + c] += static_cast<T>(dout[i * cols + c]);
  }
  return {sums.begin(), sums.end()};
}

TEST_P(ModelKernelTest, EmbeddingBackwardAddsRepeatedIndicesInIndexOrderToTheBit) {
  struct Case {
    std::size_t cols, rows, n;
    std::int64_t first_row;
    std::size_t ids;  // ids are in [0, ids)
    DType index_dtype;
  };
  // 300 columns: 7 rows, one per group, every token in the slice. 1024 columns: 200 rows over 64
  // groups, the slice [50, 250) of ids in [0, 300).
  for (const Case& k :
       {Case{300, 7, 600, 0, 7, DType::i64}, Case{1024, 200, 700, 50, 300, DType::i32}}) {
    SCOPED_TRACE(::testing::Message() << k.cols << " columns, " << k.rows << " rows");
    std::vector<std::int64_t> ids(k.n);
    for (std::size_t i = 0; i < k.n; ++i)
      ids[i] = static_cast<std::int64_t>((i * i + i / 3) % k.ids);
    const std::vector<double> dout = random(k.n * k.cols, 47);
    const std::vector<double> start = random(k.rows * k.cols, 48);
    const std::vector<double> want =
        dtype() == DType::f32
            ? embedding_scatter_in_order<float>(start, dout, ids, k.first_row, k.cols)
            : embedding_scatter_in_order<double>(start, dout, ids, k.first_row, k.cols);
    Buffer dweight = make(start);
    embedding_backward(make(dout), make_indices(ids, k.index_dtype), k.first_row, k.cols, dweight);
    expect_close(host_values(dweight), want, 0.0);
  }
}

}  // namespace
}  // namespace mpitron::test
