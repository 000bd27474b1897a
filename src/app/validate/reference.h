// The independent reference of the KERNELS checks: float64 host functions written as naive loops
// in the check itself (host_reference.h), their gradients by central finite differences (or
// analytically, where those cost too much), and the comparison of an op under test (float32 and
// float64, on the selected device) with both.
#pragma once

#include <functional>
#include <vector>

#include "app/validate/context.h"
#include "app/validate/host_reference.h"

namespace mpitron::app {

/// The analytical vector-Jacobian product of an OpCase's reference: the gradient of
/// sum(dy * reference(inputs)) for each input.
using HostVjp = std::function<HostValues(const HostValues& inputs, const std::vector<double>& dy)>;

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
  /// The reference's gradients analytically, where central differences of `reference` would
  /// cost too much (empty: central_difference_vjp of `reference`).
  HostVjp reference_vjp = {};
};

/// The tolerance of the float64 path, set by the reference's own error: central differences at
/// logits of 1e4 (h = 1e-2) are off by up to 1.6e-6 relative. A derivative with a wrong or
/// missing term is off by 1e-2 and more; float32 arithmetic hidden in the float64 path (about
/// 1e-7) passes.
inline constexpr Tolerance kFloat64Tolerance{1e-5, 1e-6, 1e-5};

/// Runs `c.op` on float32 and on float64 tensors (inputs rounded to float32 on both paths, so
/// one reference serves both) forward and backward (seeded with the same deterministic weights
/// in [-1, 1] from `seed`) and compares its output with `c.reference` and each differentiable
/// input's gradient with `c.reference_vjp` (or central_difference_vjp of the reference), within
/// ctx.tolerance for float32 and kFloat64Tolerance for float64. Logs each dtype's errors at
/// debug level.
void expect_op(const ValidateContext& ctx, OpCase c, std::uint64_t seed, Comparison& out);

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

}  // namespace mpitron::app
