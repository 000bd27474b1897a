// The float64 host side of the KERNELS checks' reference, free of tensors and MPI: flat
// row-major values, deterministic inputs, central differences, the row softmax and the
// attention loops with their analytical vector-Jacobian product.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace mpitron::app {

/// Flat float64 values, one vector per input or output.
using HostValues = std::vector<std::vector<double>>;

/// A float64 function of several flat row-major inputs, returning one flat output.
using HostFunction = std::function<std::vector<double>(const HostValues&)>;

/// The vector-Jacobian product of `f` at `inputs` with output weights `dy`, by central
/// differences: grads[j][i] = sum_k dy[k] (f(x + h e_ji)_k - f(x - h e_ji)_k) / (2 h), with
/// h = 1e-6 max(1, |x_ji|) (truncation error O(h^2), rounding O(1e-16 / h), both far below the
/// float32 errors being checked). A non-finite x_ji (a -inf logit) gets gradient 0. Costs
/// 2 sum_j |x_j| evaluations of f.
HostValues central_difference_vjp(const HostFunction& f, const HostValues& inputs,
                                  const std::vector<double>& dy);

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

/// `n` deterministic values, uniform in [lo, hi], from `seed` (a fixed LCG, so every rank and
/// every build draws the same numbers).
std::vector<double> uniform_values(std::size_t n, double lo, double hi, std::uint64_t seed);

/// The sizes of q, k, v and the output [batch, seq, heads * head_dim] of attention_reference.
struct AttentionSizes {
  std::size_t batch, seq, heads, head_dim;
  bool causal;  ///< query i sees keys j <= i only (the others score -inf)
};

/// Scaled dot-product attention per head in float64, with the whole [seq, seq] probability
/// matrix: out_i = sum_j p_ij v_j, p_i = softmax_j(q_i . k_j / sqrt(head_dim)).
std::vector<double> attention_reference(const std::vector<double>& q, const std::vector<double>& k,
                                        const std::vector<double>& v, AttentionSizes z);

/// The gradients {dq, dk, dv} of sum(dy * attention_reference(q, k, v, z)), analytically
/// (Vaswani et al. 2017's attention differentiated through the softmax, as in FlashAttention,
/// Dao et al. 2022, Appendix B.2): dv_j = sum_i p_ij dy_i, dp_ij = dy_i . v_j,
/// ds_ij = p_ij (dp_ij - sum_l p_il dp_il), dq_i = sum_j ds_ij k_j / sqrt(head_dim),
/// dk_j = sum_i ds_ij q_i / sqrt(head_dim). O(seq^2 head_dim) per head, where
/// central_difference_vjp of attention_reference costs O(seq^3 head_dim^2); tests/app's
/// test_host_reference checks the two agree.
HostValues attention_reference_vjp(const std::vector<double>& q, const std::vector<double>& k,
                                   const std::vector<double>& v, const std::vector<double>& dy,
                                   AttentionSizes z);

}  // namespace mpitron::app
