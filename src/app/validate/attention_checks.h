// The attention check of `mpitron validate`.
#pragma once

#include <vector>

#include "app/validate/context.h"

namespace mpitron::app {

/// "TP: attention forward and gradients match dense reference": tensor-parallel multi-head
/// attention over the TP group (embed = hidden, 2*tp heads when hidden divides into them, else
/// tp heads; input [batch, seq, hidden]) vs dense attention: the forward output, the MSE loss,
/// the input gradient and every projection's weight and bias gradient (this rank's shard).
std::vector<LocalCheck> check_tensor_parallel_attention(const ValidateContext& ctx);

}  // namespace mpitron::app
