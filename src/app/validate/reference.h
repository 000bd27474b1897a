// The independent reference of the KERNELS checks: float64 host functions written as naive loops
// in the check itself, their gradients by central finite differences, and the comparison of an
// op under test (float32 and float64, on the selected device) with both.
#pragma once

#include <functional>
#include <limits>
#include <vector>

#include "app/validate/context.h"

namespace mpitron::app {

/// Flat float64 values, one vector per input or output.
using HostValues = std::vector<std::vector<double>>;

/// A float64 function of several flat row-major inputs, returning one flat output.
using HostFunction = std::function<std::vector<double>(const HostValues&)>;

/// The vector-Jacobian product of `f` at `inputs` with output weights `dy`, by central
/// differences: grads[j][i] = sum_k dy[k] (f(x + h e_ji)_k - f(x - h e_ji)_k) / (2 h), with
/// h = 1e-6 max(1, |x_ji|) (truncation error O(h^2), rounding O(1e-16 / h), both far below the
/// float32 errors being checked). A non-finite x_ji (a -inf logit) gets gradient 0.
HostValues central_difference_vjp(const HostFunction& f, const HostValues& inputs,
                                  const std::vector<double>& dy);

/// One op checked against its reference.
struct OpCase {
  const char* name;                     ///< for the log, e.g. "gelu exact"
  std::vector<autograd::Shape> shapes;  ///< of each input
  HostValues inputs;                    ///< rounded to float32 before use, so both sides agree
  std::vector<bool> differentiable;     ///< which inputs' gradients are checked
  HostFunction reference;               ///< float64 naive loops
  /// The code under test on tensors of ctx.device in the dtype being checked (inputs that are
  /// differentiable require grad).
  std::function<autograd::Tensor(const std::vector<autograd::Tensor>&)> op;
};

/// The tolerance of the float64 path, set by the reference's own error: central differences at
/// logits of 1e4 (h = 1e-2) are off by up to 1.6e-6 relative. A derivative with a wrong or
/// missing term is off by 1e-2 and more; float32 arithmetic hidden in the float64 path (about
/// 1e-7) passes.
inline constexpr Tolerance kFloat64Tolerance{1e-5, 1e-6, 1e-5};

/// Runs `c.op` on `dtype` tensors (inputs rounded to float32 on both paths, so the reference is
/// the same) forward and backward (seeded with deterministic weights in [-1, 1] from `seed`) and
/// compares its output with `c.reference` and each differentiable input's gradient with
/// central_difference_vjp of the reference, within ctx.tolerance for float32 and
/// kFloat64Tolerance for float64. Logs the case's errors at debug level.
void expect_op(const ValidateContext& ctx, OpCase c, std::uint64_t seed, Comparison& out,
               autograd::DType dtype = autograd::DType::f32);

/// y[i] = f(x[i], i) for every element of x.
template <class F>
std::vector<double> map_values(const std::vector<double>& x, F f) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    y[i] = f(x[i], i);
  return y;
}

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

/// Softmax of each row of x [rows, cols] in float64, subtracting the row max: entries of -inf get
/// probability 0 (a row must hold one finite entry).
std::vector<double> softmax_rows(const std::vector<double>& x, std::size_t cols);

/// An OpCase of one differentiable input x of `shape`: `reference` and `op` map x to the output.
OpCase unary_case(const char* name, autograd::Shape shape, std::vector<double> x,
                  std::function<std::vector<double>(const std::vector<double>&)> reference,
                  std::function<autograd::Tensor(const autograd::Tensor&)> op);

/// An OpCase of two inputs a [sa] and b [sb]; b's gradient is checked when `b_grad`.
OpCase binary_case(
    const char* name, autograd::Shape sa, std::vector<double> a, autograd::Shape sb,
    std::vector<double> b,
    std::function<std::vector<double>(const std::vector<double>&, const std::vector<double>&)>
        reference,
    std::function<autograd::Tensor(const autograd::Tensor&, const autograd::Tensor&)> op,
    bool b_grad = true);

/// `n` deterministic values, uniform in [lo, hi], from `seed` (a fixed LCG, so every rank and
/// every build draws the same numbers).
std::vector<double> uniform_values(std::size_t n, double lo, double hi, std::uint64_t seed);

}  // namespace mpitron::app
