// The KERNELS checks of the Llama family's ops (RMSNorm, rotary position embedding, SwiGLU), in
// the style of kernel_checks_gpt.h: float32 and float64 on the selected device against float64
// naive loops written here and central finite differences of them (reference.h).
#pragma once

#include <vector>

#include "app/validate/reference.h"

namespace mpitron::app {

/// rms_norm of x [2, 3, 8] with weight [8] (eps 1e-5; gradients of x and weight): four rows in
/// [-2, 2], one of 100 + [-2, 2] (a large mean square) and one in [-2e-3, 2e-3] (mean square
/// below eps, so an eps outside the root or missing shows).
std::vector<OpCase> rms_norm_cases();

/// rotary_embedding of x [2, 3, 2, 8] ([batch, seq, heads, head_dim]) at theta 10000 from
/// position 0 and at theta 500000 from position 4093 (a generation step, where an angle computed
/// in float32 would be off by ~2e-4 radians), against the rotation of each rotate_half pair
/// (i, i + 4) by p theta^(-2i/8) in float64; the gradient of x (the inverse rotation).
std::vector<OpCase> rotary_cases();

/// swiglu of gate and up [4, 8]: gates in [-10, 10] and the tails +-30 and +-90 (where the
/// sigmoid saturates and e^-90 underflows float32), ups in [-2, 2]; gradients of both.
std::vector<OpCase> swiglu_cases();

}  // namespace mpitron::app
