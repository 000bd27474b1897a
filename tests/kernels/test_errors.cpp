// Argument checks: every mismatch raises std::invalid_argument naming the op and both sizes (or
// both devices/dtypes). The checks run before dispatch, so CPU buffers cover every backend.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/ops.h"

namespace mpitron::test {
using namespace ::mpitron::kernels;
namespace {

Buffer cpu(std::size_t n, DType dtype = DType::f32) {
  return Buffer(n, dtype, Device::cpu);
}

/// Expects `call` to throw std::invalid_argument whose message holds every string in `parts`.
void expect_invalid(const std::function<void()>& call, std::initializer_list<std::string> parts) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected one mentioning " << *parts.begin();
  } catch (const std::invalid_argument& e) {
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << e.what() << "' lacks '" << part << "'";
    }
  }
}

TEST(Errors, ElementwiseSizeMismatchNamesOpAndSizes) {
  Buffer a = cpu(6), b = cpu(5), out = cpu(6);
  expect_invalid([&] { add(a, b, out); }, {"kernels::add", "5", "6"});
  expect_invalid([&] { mul(a, a, b); }, {"kernels::mul", "5", "6"});
  expect_invalid([&] { axpy(1.0, a, b); }, {"kernels::axpy", "5", "6"});
  expect_invalid([&] { gelu_backward(a, b, out, GeluForm::exact); },
                 {"kernels::gelu_backward", "5", "6"});
  expect_invalid([&] { gelu_forward_backward(a, a, b, out, GeluForm::tanh); },
                 {"kernels::gelu_forward_backward", "5", "6"});
  expect_invalid([&] { mse_forward(a, b, out); }, {"kernels::mse_forward", "5", "6"});
}

TEST(Errors, DtypeAndDeviceMismatchNameBoth) {
  Buffer a = cpu(4), b = cpu(4, DType::f64), out = cpu(4);
  expect_invalid([&] { sub(a, b, out); }, {"kernels::sub", "float32", "float64"});
}

TEST(Errors, RowOpsRejectPartialRows) {
  Buffer x = cpu(10), bias = cpu(3), out = cpu(10);
  expect_invalid([&] { bias_add(x, bias, 3, out); }, {"kernels::bias_add", "10", "3"});
  expect_invalid([&] { bias_gelu(x, bias, 3, out, GeluForm::exact); },
                 {"kernels::bias_gelu", "10", "3"});
  Buffer y = cpu(12), g = cpu(10);
  expect_invalid([&] { bias_gelu(y, bias, 3, g, GeluForm::exact); },
                 {"kernels::bias_gelu", "10", "12"});
  expect_invalid([&] { softmax_forward(x, 4, out); }, {"kernels::softmax_forward", "10", "4"});
  expect_invalid([&] { softmax_forward(x, 0, out); }, {"kernels::softmax_forward", "cols = 0"});
  Buffer sums = cpu(4);
  expect_invalid([&] { sum_rows(x, 5, sums); }, {"kernels::sum_rows", "4", "5"});
}

TEST(Errors, ScalarArgumentsMustHaveOneElement) {
  Buffer x = cpu(4), two = cpu(2);
  expect_invalid([&] { sum(x, two); }, {"kernels::sum", "2", "1"});
  expect_invalid([&] { broadcast_scalar(two, 1.0, x); }, {"kernels::broadcast_scalar", "2", "1"});
  expect_invalid([&] { mse_backward(x, x, two, x); }, {"kernels::mse_backward", "2", "1"});
}

TEST(Errors, GemmChecksEveryOperand) {
  // m = 2, n = 4, k = 3: a needs 6, b 12, c 8 elements.
  Buffer a = cpu(6), b = cpu(12), c = cpu(8), b11 = cpu(11), c9 = cpu(9);
  expect_invalid([&] { gemm(false, false, 2, 4, 3, 1.0, a, b11, 0.0, c); },
                 {"kernels::gemm:", "b has 11", "12"});
  expect_invalid([&] { gemm(false, false, 2, 4, 3, 1.0, a, b, 0.0, c9); },
                 {"kernels::gemm:", "c has 9", "8"});
  Buffer square = cpu(4);
  expect_invalid([&] { gemm(false, false, 2, 2, 2, 1.0, square, square, 0.0, square); },
                 {"kernels::gemm:", "alias"});
  expect_invalid([&] { gemm_batched(false, false, 2, 2, 2, 2, 1.0, a, 4, b, 4, 0.0, c, 0); },
                 {"kernels::gemm_batched", "overlap"});
  expect_invalid([&] { gemm_batched(false, false, 3, 2, 2, 2, 1.0, a, 4, b, 4, 0.0, c, 4); },
                 {"kernels::gemm_batched", "a has 6", "12"});
}

TEST(Errors, TransposeChecksTheShape) {
  Buffer x = cpu(24), y = cpu(23);
  expect_invalid([&] { transpose(x, 1, 2, 3, 4, 1, y); }, {"kernels::transpose", "23", "24"});
  expect_invalid([&] { transpose(x, 1, 2, 3, 4, 1, x); }, {"kernels::transpose", "alias"});
}

TEST(Errors, ModelOpsCheckShapesIndicesAndHyperparameters) {
  Buffer x = cpu(12), w3 = cpu(3), w4 = cpu(4), rows3 = cpu(3), y = cpu(12);
  expect_invalid([&] { layer_norm_forward(x, w3, w4, 4, 1e-5, y, y, rows3); },
                 {"kernels::layer_norm_forward", "weight has 3", "4"});
  expect_invalid([&] { layer_norm_forward(x, w4, w4, 4, 1e-5, y, rows3, rows3); },
                 {"kernels::layer_norm_forward", "xhat has 3", "12"});
  expect_invalid([&] { layer_norm_forward(x, w4, w4, 4, -1.0, y, y, rows3); },
                 {"kernels::layer_norm_forward", "eps must be >= 0"});
  Buffer x64 = cpu(12, DType::f64), w64 = cpu(4, DType::f64), y64 = cpu(12, DType::f64);
  Buffer rows64 = cpu(3, DType::f64), xhat16 = cpu(12, DType::bf16);
  expect_invalid([&] { layer_norm_forward(x64, w64, w64, 4, 1e-5, y64, xhat16, rows64); },
                 {"kernels::layer_norm_forward", "xhat", "bfloat16"});
  Buffer float_ids = cpu(2), ids = cpu(2, DType::i64), out = cpu(8);
  expect_invalid([&] { embedding_forward(x, 4, float_ids, 0, out); },
                 {"kernels::embedding_forward", "indices is cpu float32", "int32 or int64"});
  expect_invalid([&] { embedding_backward(out, ids, 0, 4, w3); },
                 {"kernels::embedding_backward", "dweight has 3", "cols = 4"});
  Buffer targets2 = cpu(2, DType::i32), targets3 = cpu(3, DType::i32), one = cpu(1);
  expect_invalid([&] { cross_entropy_stats(x, 4, 4, targets2, 0, rows3, rows3, rows3); },
                 {"kernels::cross_entropy_stats", "targets has 2", "3"});
  expect_invalid([&] { cross_entropy_stats(x, 4, 5, targets3, 0, rows3, rows3, rows3); },
                 {"kernels::cross_entropy_stats", "used_cols 5 is more than the 4 columns"});
  expect_invalid([&] { cross_entropy_loss(rows3, w4, rows3, targets3, 3.0, one); },
                 {"kernels::cross_entropy_loss", "sum_exp has 4", "3"});
  expect_invalid([&] { cross_entropy_loss(rows3, rows3, rows3, targets2, 3.0, one); },
                 {"kernels::cross_entropy_loss", "targets has 2", "3"});
  expect_invalid([&] { cross_entropy_loss(rows3, rows3, rows3, targets3, -1.0, one); },
                 {"kernels::cross_entropy_loss", "divisor must be a finite number >= 0"});
  expect_invalid(
      [&] {
        cross_entropy_backward(x, 4, 4, targets3, 0, rows3, rows3, one,
                               std::numeric_limits<double>::quiet_NaN(), y);
      },
      {"kernels::cross_entropy_backward", "divisor must be a finite number >= 0"});
  Buffer p = cpu(4), g = cpu(4), m = cpu(4), v = cpu(4);
  expect_invalid([&] { adamw_update(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.0, 0); },
                 {"kernels::adamw_update", "step must be >= 1, got 0"});
  expect_invalid([&] { adamw_update(p, g, m, v, 1e-3, 1.0, 0.999, 1e-8, 0.0, 1); },
                 {"kernels::adamw_update", "beta1 must be in [0, 1)"});
  expect_invalid([&] { sum_squares(x, w3); }, {"kernels::sum_squares", "3", "1"});
}

}  // namespace
}  // namespace mpitron::test
