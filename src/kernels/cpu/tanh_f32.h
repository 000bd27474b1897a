// Branch-free float32 tanh for the CPU loops of GPT-2's GELU (the tanh form), written so the
// compiler vectorizes it: the C library's tanhf is a scalar call, and it took about a tenth of a
// GPT-2 124M training step. Absolute error below 1e-7 (tests/kernels checks it against std::tanh
// in double), which is what GELU needs: it uses 1 + tanh, whose float32 rounding is 6e-8 anyway.
#pragma once

#include <algorithm>
#include <cmath>

#include "kernels/cpu/erf_f32.h"
#include "kernels/math.h"

namespace mpitron::kernels::cpu {

/// tanh(x) = sign(x) (1 - e^{-2a}) / (1 + e^{-2a}) with a = min(|x|, 9) (tanh(9) = 1 - 3e-8
/// is 1 in float32), e^{-2a} by exp_f32. NaN stays NaN.
inline float tanh_f32(float x) {
  const float a = std::min(std::abs(x), 9.0f);
  const float e = exp_f32(-2.0f * a);
  return std::copysign((1.0f - e) / (1.0f + e), x);
}

/// GELU's tanh form and its derivative, math::gelu_value_and_grad(x, GeluForm::tanh) in float32
/// through tanh_f32 (one tanh for both).
inline math::GeluValueGrad<float> gelu_tanh_value_and_grad_f32(float x) {
  const float u = static_cast<float>(math::kSqrt2OverPi) *
                  (x + static_cast<float>(math::kGeluCubic) * x * x * x);
  const float t = tanh_f32(u);
  const float du = static_cast<float>(math::kSqrt2OverPi) *
                   (1.0f + static_cast<float>(3 * math::kGeluCubic) * x * x);
  return {0.5f * x * (1.0f + t), 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du};
}

}  // namespace mpitron::kernels::cpu
