// The bfloat16 copies of the weights that GEMMs multiply, made once per training step instead of
// at every GEMM.
#pragma once

#include <memory>

#include "autograd/tensor.h"

namespace mpitron::autograd {

/// Storage for weight_operand's bfloat16 copies that outlives a Bf16WeightScope: a scope opened
/// on it rounds each parameter into the copy the last one made (the same buffer) instead of a
/// new one, so a training loop allocates the copies (2 bytes a parameter element) once, not each
/// step: nn::GptTrainer keeps one (GPT-2 124M at seq 64: 25,000 page faults a step, 10 % of a
/// `--bf16` step, had gone to allocating them afresh). It keeps the parameters it has copied
/// alive, and the copies' bytes between scopes.
class Bf16WeightCopies {
 public:
  Bf16WeightCopies();
  ~Bf16WeightCopies();
  Bf16WeightCopies(const Bf16WeightCopies&) = delete;
  Bf16WeightCopies& operator=(const Bf16WeightCopies&) = delete;
  Bf16WeightCopies(Bf16WeightCopies&&) noexcept;
  Bf16WeightCopies& operator=(Bf16WeightCopies&&) noexcept;

  /// The bfloat16 copy kept for parameter `weight` (its shape, bfloat16), or an undefined Tensor
  /// when none is kept (before its first GEMM in a scope on this).
  Tensor kept_copy(const Tensor& weight) const;
  /// Declares that every element of weight's kept copy holds weight's present values rounded to
  /// bfloat16 (the optimizer wrote both in one pass: nn::Optimizer::step), so the
  /// next scope opened on this hands the copy to GEMMs without rounding the parameter again; a
  /// scope after that rounds it again as usual. Nothing when no copy is kept. Any other change
  /// of the parameter before that next scope would leave the copy wrong.
  void mark_refreshed(const Tensor& weight);

  struct Entries;  ///< the copies, keyed by the parameter's shared state (weight_operands.cpp)

 private:
  friend class Bf16WeightScope;
  std::unique_ptr<Entries> entries_;
};

/// While one is alive, under kernels::GemmOperands::bfloat16, weight_operand rounds each float32
/// parameter (a leaf that requires grad) to bfloat16 once, on first use, and hands that copy to
/// every later GEMM that multiplies the parameter: a step's micro-batches, forward and backward,
/// and the row chunks of fused_mlp, instead of each GEMM rounding it again. The parameters must
/// not change while it is alive: nn::GptTrainer opens one around a step's forward and backward
/// passes, before the optimizer writes them, and around evaluation. A scope opened inside another
/// adds nothing (the outer one keeps the copies). One thread: the autograd ops run on the
/// caller's thread.
class Bf16WeightScope {
 public:
  /// The copies are freed when the scope ends.
  Bf16WeightScope();
  /// The copies are kept in `keep` when the scope ends, and the next scope on `keep` rounds each
  /// parameter again, on its first use there, into the same buffer (unless its copy was marked
  /// refreshed since: Bf16WeightCopies::mark_refreshed).
  explicit Bf16WeightScope(Bf16WeightCopies& keep);
  ~Bf16WeightScope();
  Bf16WeightScope(const Bf16WeightScope&) = delete;
  Bf16WeightScope& operator=(const Bf16WeightScope&) = delete;

 private:
  // The copies of an outermost scope that no Bf16WeightCopies keeps.
  std::unique_ptr<Bf16WeightCopies::Entries> own_;
  bool owner_ = false;
};

/// What a GEMM multiplies for a weight [out, in]: gemm_operand(weight) (under bfloat16 operands
/// a float32 weight's bfloat16 copy, the bits kernels::gemm rounds it to; otherwise weight
/// itself), kept for reuse inside a Bf16WeightScope when weight is a parameter (a leaf that
/// requires grad). `linear`, `linear_bf16_output` and `fused_mlp` read their weights through it.
Tensor weight_operand(const Tensor& weight);

}  // namespace mpitron::autograd
