// Internal: the per-row and per-element formulas of the Llama family's ops (RMSNorm, rotary
// position embedding, SwiGLU), shared by the CPU loops (cpu/llama_ops.h) and the CUDA kernels
// (cuda/llama_ops.cu), so each is written once.
#pragma once

#include <cmath>
#include <cstddef>

#include "kernels/math.h"
#include "kernels/rope.h"

namespace mpitron::kernels::math {

/// RMSNorm's reciprocal root mean square of one row, 1 / sqrt(sum_squares / cols + eps), from
/// the row's sum of squares accumulated in double (Zhang & Sennrich, arXiv:1910.07467).
MPITRON_HOST_DEVICE inline double rms_norm_rstd(double sum_squares, std::size_t cols, double eps) {
  using std::sqrt;
  return 1.0 / sqrt(sum_squares / static_cast<double>(cols) + eps);
}

/// RMSNorm output of one element: (x rstd) weight, in Hugging Face LlamaRMSNorm's order.
template <class T>
MPITRON_HOST_DEVICE inline T rms_norm_y(T x, T rstd, T weight) {
  return x * rstd * weight;
}

/// RMSNorm input gradient of one element: rstd (g - xhat mean(g xhat)), with g = dy weight,
/// xhat = x rstd and the row mean of g xhat given.
template <class T>
MPITRON_HOST_DEVICE inline T rms_norm_dx(T g, T xhat, T rstd, T mean_g_xhat) {
  return rstd * (g - xhat * mean_g_xhat);
}

/// The cosine and sine of one rotary angle, rounded to the element type (rotary_cos_sin).
template <class T>
struct RotaryCosSin {
  T cos, sin;
};

/// cos and sin (sin negated when `inverse`: the rotation's transpose, which is backward's) of the
/// angle of pair i (i < head_dim / 2) at `position`, position rope.inverse_frequency(i, head_dim)
/// radians (Su et al., arXiv:2104.09864, sec. 3.2; kernels/rope.h). The angle, cos and sin are
/// computed in double whatever T is, so large positions keep their precision, and rounded once
/// to T.
template <class T>
MPITRON_HOST_DEVICE inline RotaryCosSin<T> rotary_cos_sin(double position, std::size_t i,
                                                          std::size_t head_dim,
                                                          const RopeFrequencies& rope,
                                                          bool inverse) {
  using std::cos;
  using std::sin;
  const double angle = position * rope.inverse_frequency(i, head_dim);
  return {static_cast<T>(cos(angle)), static_cast<T>(inverse ? -sin(angle) : sin(angle))};
}

/// One rotated pair (rotary_rotate).
template <class T>
struct RotaryPair {
  T lo, hi;
};

/// The pair (lo, hi) turned by the angle of `cs`: lo cos - hi sin and hi cos + lo sin. Hugging
/// Face Llama's pair i of a head is its elements (i, i + head_dim / 2) (rotate_half).
template <class T>
MPITRON_HOST_DEVICE inline RotaryPair<T> rotary_rotate(T lo, T hi, RotaryCosSin<T> cs) {
  return {lo * cs.cos - hi * cs.sin, hi * cs.cos + lo * cs.sin};
}

/// The logistic sigmoid 1 / (1 + e^-g) through e = e^-|g| <= 1, so `exp` only sees
/// non-positive arguments (as in attention_math.h) and nothing overflows: 1 / (1 + e) for
/// g >= 0, e / (1 + e) below.
template <class T, class Exp = LibraryExp>
MPITRON_HOST_DEVICE inline T sigmoid(T g, Exp exp = {}) {
  const T e = exp(g >= T(0) ? -g : g);
  return (g >= T(0) ? T(1) : e) / (T(1) + e);
}

/// SwiGLU of one element, silu(gate) up = gate sigmoid(gate) up (Shazeer, arXiv:2002.05202:
/// Swish_1(x W) * (x V) once the two projections are done).
template <class T, class Exp = LibraryExp>
MPITRON_HOST_DEVICE inline T swiglu(T gate, T up, Exp exp = {}) {
  return gate * sigmoid(gate, exp) * up;
}

/// The two input gradients of one SwiGLU element (swiglu_grads).
template <class T>
struct SwigluGrads {
  T dgate, dup;
};

/// SwiGLU's input gradients for upstream dy: with s = sigmoid(gate),
/// dgate = dy up s (1 + gate (1 - s)) (silu's derivative) and dup = dy gate s.
template <class T, class Exp = LibraryExp>
MPITRON_HOST_DEVICE inline SwigluGrads<T> swiglu_grads(T gate, T up, T dy, Exp exp = {}) {
  const T s = sigmoid(gate, exp);
  return {dy * up * s * (T(1) + gate * (T(1) - s)), dy * gate * s};
}

}  // namespace mpitron::kernels::math
