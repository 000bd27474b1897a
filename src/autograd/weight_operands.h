// The bfloat16 copies of the weights that GEMMs multiply, made once per training step instead of
// at every GEMM.
#pragma once

#include "autograd/tensor.h"

namespace mpitron::autograd {

/// While one is alive, under kernels::GemmOperands::bfloat16, weight_operand rounds each float32
/// parameter (a leaf that requires grad) to bfloat16 once, on first use, and hands that copy to
/// every later GEMM that multiplies the parameter: a step's micro-batches, forward and backward,
/// and the row chunks of fused_mlp, instead of each GEMM rounding it again. The copies (2 bytes a
/// parameter element) are freed when the scope ends. The parameters must not change while it is
/// alive: nn::GptTrainer opens one around a step's forward and backward passes, before the
/// optimizer writes them, and around evaluation. A scope opened inside another adds nothing (the
/// outer one keeps the copies). One thread: the autograd ops run on the caller's thread.
class Bf16WeightScope {
 public:
  Bf16WeightScope();
  ~Bf16WeightScope();
  Bf16WeightScope(const Bf16WeightScope&) = delete;
  Bf16WeightScope& operator=(const Bf16WeightScope&) = delete;

 private:
  bool owner_ = false;
};

/// What a GEMM multiplies for a weight [out, in]: gemm_operand(weight) (under bfloat16 operands
/// a float32 weight's bfloat16 copy, the bits kernels::gemm rounds it to; otherwise weight
/// itself), kept for reuse inside a Bf16WeightScope when weight is a parameter (a leaf that
/// requires grad). `linear`, `linear_bf16_output` and `fused_mlp` read their weights through it.
Tensor weight_operand(const Tensor& weight);

}  // namespace mpitron::autograd
