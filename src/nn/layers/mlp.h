// The transformer MLP block: Linear(hidden -> intermediate), GELU, Linear(intermediate -> hidden),
// dense and tensor-parallel (column-parallel -> GELU -> row-parallel, Megatron-LM sec. 3).
#pragma once

#include <cstdint>
#include <optional>

#include "comm/communicator.h"
#include "kernels/ops.h"
#include "nn/layers/linear.h"
#include "nn/parameter.h"

namespace mpitron::nn {

using kernels::GeluForm;

/// The full weights of one MLP: fc1 [intermediate, hidden] (+ bias), fc2 [hidden, intermediate]
/// (+ bias), and for a SwiGLU MLP gate [intermediate, hidden] (then fc1 is the up projection and
/// fc2 the down projection; an undefined gate weight means the GELU MLP).
struct MlpWeights {
  LinearWeights fc1;
  LinearWeights fc2;
  LinearWeights gate;
};

/// Master MLP weights: fc1 from `fc1_seed`, fc2 from `fc2_seed` (see make_linear_weights).
MlpWeights make_mlp_weights(std::int64_t hidden, std::int64_t intermediate, std::uint64_t fc1_seed,
                            std::uint64_t fc2_seed, DType dtype, Device device);

/// Dense MLP: x [..., hidden] -> fc2(gelu(fc1(x))) [..., hidden]; the exact (erf) GELU unless
/// `gelu` says the tanh form. Computed by autograd::fused_mlp (then + fc2 bias), which saves x
/// and the fc1 output for backward.
class Mlp {
 public:
  explicit Mlp(const MlpWeights& weights, GeluForm gelu = GeluForm::exact);
  Tensor forward(const Tensor& x) const;
  /// fc1.weight, fc1.bias, fc2.weight, fc2.bias.
  Parameters parameters() const;

 private:
  Linear fc1_, fc2_;
  GeluForm gelu_;
};

/// Tensor-parallel MLP over `tp`: rank t holds fc1 rows and fc2 columns
/// [t intermediate/tp, (t+1) intermediate/tp); the output is identical on every TP rank.
/// Forward: copy-to-TP, autograd::fused_mlp on this rank's shards, reduce-from-TP, + fc2 bias.
/// With `sequence_parallel` the input is all-gathered along seq and the output reduce-scattered
/// (enter_tp_region, exit_tp_region; Korthikanti et al. 2022, arXiv:2205.05198, sec. 4.2.2).
/// Throws std::invalid_argument when intermediate is not divisible by tp. GELU as in Mlp.
/// With a gate (SwiGLU; Shazeer, arXiv:2002.05202; Hugging Face's LlamaMLP):
/// fc2(swiglu(gate(x), fc1(x))), gate and fc1 column-parallel, fc2 row-parallel. The gate and up
/// weights stay two tensors, each cut by rows, so a rank holds [gate_t; up_t]: the same per-rank
/// layout as Megatron-LM's fused gate/up matrix, which interleaves the ranks' halves.
class ParallelMlp {
 public:
  ParallelMlp(const MlpWeights& master, const comm::Communicator& tp,
              GeluForm gelu = GeluForm::exact, bool sequence_parallel = false);
  /// x [..., hidden] (same on every TP rank) -> [..., hidden]; with sequence parallelism
  /// x [batch, seq/tp, hidden] -> [batch, seq/tp, hidden].
  Tensor forward(const Tensor& x) const;
  /// fc1.weight [intermediate/tp, hidden], fc1.bias [intermediate/tp],
  /// fc2.weight [hidden, intermediate/tp], fc2.bias [hidden]; with a gate gate.weight
  /// [intermediate/tp, hidden] first (biases only where the master has them).
  Parameters parameters() const;

 private:
  comm::Communicator tp_;
  std::optional<ColumnParallelLinear> gate_;
  ColumnParallelLinear fc1_;
  RowParallelLinear fc2_;
  GeluForm gelu_;
  bool sequence_parallel_;
};

}  // namespace mpitron::nn
