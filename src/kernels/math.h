// Internal: scalar formulas shared by the CPU loops and the CUDA kernels, so each is written once.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/ops.h"

#if defined(__CUDACC__)
#define MPITRON_HOST_DEVICE __host__ __device__
#else
#define MPITRON_HOST_DEVICE
#endif

namespace mpitron::kernels::math {

inline constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
inline constexpr double kInvSqrt2 = 0.70710678118654752440;     // 1 / sqrt(2)
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
inline constexpr double kGeluCubic = 0.044715;                  // tanh-form coefficient

/// Interleaved accumulators of lane_sum and lane_max: 8 (one AVX-512 vector of double, one AVX2
/// vector of float), so the adds or compares of one row do not wait on each other.
inline constexpr std::size_t kSumLanes = 8;

/// sum_{i < n} term(i) in Acc, in one order fixed by n: term i goes to accumulator i mod
/// kSumLanes up to the last whole group of kSumLanes, the rest to one more accumulator in index
/// order; the kSumLanes accumulators are then added pairwise in a fixed tree (j + j + 4, then
/// j + j + 2, then 0 + 1) and the rest last. The order lets the compiler vectorize the sum
/// without reassociating it, and the same n gives the same bits on every thread and device.
template <class Acc, class Term>
MPITRON_HOST_DEVICE inline Acc lane_sum(std::size_t n, Term term) {
  Acc lanes[kSumLanes] = {};
  std::size_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    for (std::size_t j = 0; j < kSumLanes; ++j)
      lanes[j] += term(i + j);
  }
  Acc rest = Acc(0);
  for (; i < n; ++i)
    rest += term(i);
  for (std::size_t width = kSumLanes / 2; width > 0; width /= 2) {
    for (std::size_t j = 0; j < width; ++j)
      lanes[j] += lanes[j + width];
  }
  return lanes[0] + rest;
}

#if !defined(__CUDACC__) && defined(__GNUC__)
/// lane_max's whole groups of kSumLanes elements of x[0, n) into lanes[], lane j taking element
/// i + j of each group by the same `a > b ? a : b`, on one vector of kSumLanes T (GCC's vector
/// extension: GCC leaves the scalar loop unvectorized, a max reduction to it without
/// -ffinite-math-only, though every lane compares only its own elements); returns the elements
/// consumed. CPU builds only (the CUDA kernels run the scalar loop, which gives the same bits).
template <class T>
inline std::size_t lane_max_groups(const T* x, std::size_t n, T* lanes) {
  typedef T Lanes __attribute__((vector_size(kSumLanes * sizeof(T))));
  static_assert(sizeof(Lanes) == kSumLanes * sizeof(T));
  Lanes acc;
  std::memcpy(&acc, lanes, sizeof acc);
  std::size_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    Lanes v;
    std::memcpy(&v, x + i, sizeof v);
    acc = v > acc ? v : acc;
  }
  std::memcpy(lanes, &acc, sizeof acc);
  return i;
}
#endif

/// max(init, x[0], ..., x[n - 1]) by `a > b ? a : b` over kSumLanes interleaved lanes (the
/// result does not depend on the order unless x holds NaN).
template <class T>
MPITRON_HOST_DEVICE inline T lane_max(const T* x, std::size_t n, T init) {
  T lanes[kSumLanes];
  for (std::size_t j = 0; j < kSumLanes; ++j)
    lanes[j] = init;
  std::size_t i = 0;
#if !defined(__CUDACC__) && defined(__GNUC__)
  if constexpr (std::is_floating_point_v<T>) i = lane_max_groups(x, n, lanes);
#endif
  for (; i + kSumLanes <= n; i += kSumLanes) {
    for (std::size_t j = 0; j < kSumLanes; ++j)
      lanes[j] = x[i + j] > lanes[j] ? x[i + j] : lanes[j];
  }
  for (; i < n; ++i)
    lanes[0] = x[i] > lanes[0] ? x[i] : lanes[0];
  for (std::size_t width = kSumLanes / 2; width > 0; width /= 2) {
    for (std::size_t j = 0; j < width; ++j)
      lanes[j] = lanes[j + width] > lanes[j] ? lanes[j + width] : lanes[j];
  }
  return lanes[0];
}

/// e^x through the math library's exp for T: the default exponential of the softmax-style
/// functions here and in attention_math.h (the CPU loops pass the vectorizable
/// cpu::NonPositiveExp).
struct LibraryExp {
  template <class T>
  MPITRON_HOST_DEVICE T operator()(T x) const {
    using std::exp;
    return exp(x);
  }
};

/// gelu(x) and its derivative d gelu / dx at one x (gelu_value_and_grad).
template <class T>
struct GeluValueGrad {
  T value, grad;
};

/// gelu(x) and d gelu / dx together, sharing the erf or tanh (Hendrycks & Gimpel,
/// arXiv:1606.08415). Exact: gelu = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), derivative
/// Phi(x) + x phi(x) with phi(x) = exp(-x^2 / 2) / sqrt(2 pi). Tanh form: gelu =
/// 0.5 x (1 + t) with t = tanh(u), u = sqrt(2/pi) (x + 0.044715 x^3), derivative
/// 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
template <class T>
MPITRON_HOST_DEVICE inline GeluValueGrad<T> gelu_value_and_grad(T x, GeluForm form) {
  using std::erf;
  using std::exp;
  using std::tanh;
  if (form == GeluForm::exact) {
    const T one_plus_erf = T(1) + erf(x * T(kInvSqrt2));
    return {T(0.5) * x * one_plus_erf,
            T(0.5) * one_plus_erf + x * T(kInvSqrt2Pi) * exp(T(-0.5) * x * x)};
  }
  const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
  const T t = tanh(u);
  const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
  return {T(0.5) * x * (T(1) + t), T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du};
}

/// gelu(x) of `form` (gelu_value_and_grad's value; torch.nn.functional.gelu).
template <class T>
MPITRON_HOST_DEVICE inline T gelu(T x, GeluForm form) {
  return gelu_value_and_grad(x, form).value;
}

/// d gelu / dx of `form` (gelu_value_and_grad's derivative).
template <class T>
MPITRON_HOST_DEVICE inline T gelu_grad(T x, GeluForm form) {
  return gelu_value_and_grad(x, form).grad;
}

/// The per-step scalars of AdamW, derived once per step on the host in double (as PyTorch does
/// in Python floats) and rounded once to the element type.
template <class T>
struct AdamWHyper {
  T decay;  // 1 - lr * weight_decay
  T beta1, one_minus_beta1;
  T beta2, one_minus_beta2;
  T bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  T step_size;              // lr / (1 - beta1^step)
  T eps;

  template <class U>
  AdamWHyper<U> as() const {
    return {U(decay),           U(beta1),
            U(one_minus_beta1), U(beta2),
            U(one_minus_beta2), U(bias_correction2_sqrt),
            U(step_size),       U(eps)};
  }
};

/// One AdamW element update in torch.optim.AdamW's order (PyTorch 1.13 _single_tensor_adamw):
/// p *= decay; m = m beta1 + (1 - beta1) g; v = v beta2 + (1 - beta2) g g;
/// p += -step_size * (m / (sqrt(v) / bias_correction2_sqrt + eps)).
template <class T>
MPITRON_HOST_DEVICE inline void adamw(T& p, T g, T& m, T& v, const AdamWHyper<T>& h) {
  using std::sqrt;
  p = p * h.decay;
  m = m * h.beta1 + h.one_minus_beta1 * g;
  v = v * h.beta2 + h.one_minus_beta2 * g * g;
  const T denom = sqrt(v) / h.bias_correction2_sqrt + h.eps;
  p = p + -h.step_size * (m / denom);
}

/// The row of a slice [first, first + rows) that holds global index `index`, or -1 outside it:
/// the embedding rows / logit columns one tensor-parallel rank owns.
template <class I>
MPITRON_HOST_DEVICE inline std::int64_t slice_row(I index, std::int64_t first, std::size_t rows) {
  const std::int64_t local = static_cast<std::int64_t>(index) - first;
  return local >= 0 && local < static_cast<std::int64_t>(rows) ? local : -1;
}

/// LayerNorm input gradient of one element: rstd (g - mean(g) - xhat mean(g xhat)), with
/// g = dy weight and the two row means given.
template <class T>
MPITRON_HOST_DEVICE inline T layer_norm_dx(T g, T xhat, T rstd, T mean_g, T mean_g_xhat) {
  return rstd * (g - mean_g - xhat * mean_g_xhat);
}

/// Whether a cross-entropy row counts: its target is not kIgnoreTarget (ops.h). An ignored row
/// adds nothing to the loss and gets a zero gradient row; being negative, its target lies in no
/// vocabulary slice (slice_row gives -1), so cross_entropy_stats writes a target logit of 0.
static_assert(kIgnoreTarget < 0, "an ignored target must lie outside every vocabulary slice");
template <class I>
MPITRON_HOST_DEVICE inline bool counts_target(I target) {
  return static_cast<std::int64_t>(target) != kIgnoreTarget;
}

/// One row's cross-entropy -log softmax(logits)[target] = log(sum_exp) + max - target_logit from
/// its full-vocabulary statistics, in double; 0 for an ignored target.
template <class T, class I>
MPITRON_HOST_DEVICE inline double cross_entropy_term(T max, T sum_exp, T target_logit, I target) {
  using std::log;
  return counts_target(target) ? log(static_cast<double>(sum_exp)) + static_cast<double>(max) -
                                     static_cast<double>(target_logit)
                               : 0.0;
}

/// value / divisor, or 0 when divisor is 0: the cross-entropy loss (value = the sum of the rows'
/// terms) and its gradient's scale (value = dloss). The op layers pass a divisor of 0 only when
/// every target is ignored: the loss and the gradient are then 0, never 0 / 0.
MPITRON_HOST_DEVICE inline double cross_entropy_scaled(double value, double divisor) {
  return divisor > 0.0 ? value / divisor : 0.0;
}

/// Cross-entropy logit gradient of one element: coef (exp(logit - max) / sum_exp - onehot), with
/// coef = cross_entropy_scaled(dloss, divisor); `exp` is e^x for x <= 0, as in
/// attention_math.h.
template <class T, class Exp = LibraryExp>
MPITRON_HOST_DEVICE inline T cross_entropy_grad(T logit, T max, T sum_exp, bool is_target, T coef,
                                                Exp exp = {}) {
  return coef * (exp(logit - max) / sum_exp - (is_target ? T(1) : T(0)));
}

}  // namespace mpitron::kernels::math
