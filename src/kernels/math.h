// Internal: scalar formulas shared by the CPU loops and the CUDA kernels, so each is written once.
#pragma once

#include <cmath>

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

/// gelu(x): exact x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel, arXiv:1606.08415).
template <class T>
MPITRON_HOST_DEVICE inline T gelu(T x, GeluForm form) {
  using std::erf;
  using std::tanh;
  if (form == GeluForm::exact) return T(0.5) * x * (T(1) + erf(x * T(kInvSqrt2)));
  const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
  return T(0.5) * x * (T(1) + tanh(u));
}

/// d gelu / dx: exact Phi(x) + x phi(x) with phi(x) = exp(-x^2 / 2) / sqrt(2 pi); tanh form
/// 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2) with t = tanh(u) as above.
template <class T>
MPITRON_HOST_DEVICE inline T gelu_grad(T x, GeluForm form) {
  using std::erf;
  using std::exp;
  using std::tanh;
  if (form == GeluForm::exact) {
    return T(0.5) * (T(1) + erf(x * T(kInvSqrt2))) + x * T(kInvSqrt2Pi) * exp(T(-0.5) * x * x);
  }
  const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
  const T t = tanh(u);
  const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
}

}  // namespace mpitron::kernels::math
