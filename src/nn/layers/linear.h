// Linear layers: dense, column-parallel and row-parallel. Shoeybi et al., "Megatron-LM",
// arXiv:1909.08053, sec. 3. PyTorch convention: weight [out, in], y = x W^T + b.
#pragma once

#include "comm/communicator.h"
#include "nn/parameter.h"

namespace mpitron::nn {

/// A dense linear layer owning copies of `weights` as parameters.
class Linear {
 public:
  explicit Linear(const LinearWeights& weights);
  /// x [..., in] -> [..., out].
  Tensor forward(const Tensor& x) const;
  /// "weight" [out, in], "bias" [out] (when the layer has one).
  Parameters parameters() const;
  /// The parameters themselves (for fused ops such as autograd::fused_mlp).
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  Tensor weight_, bias_;
};

/// Output features split over the TP group: rank t owns weight rows and bias entries
/// [t out/tp, (t+1) out/tp). The input is replicated (copy-to-TP in front).
/// Throws std::invalid_argument when out is not divisible by tp.
class ColumnParallelLinear {
 public:
  /// `gather_output`: all-gather the output shards into the full [..., out] (otherwise each rank
  /// returns its [..., out/tp] shard, as an MLP's first layer does).
  ColumnParallelLinear(const LinearWeights& master, const comm::Communicator& tp,
                       bool gather_output);
  /// x [..., in] (same on every TP rank) -> [..., out/tp], or [..., out] when gathering.
  Tensor forward(const Tensor& x) const;
  /// "weight" [out/tp, in], "bias" [out/tp] (when the layer has one).
  Parameters parameters() const;
  /// This rank's shards: weight [out/tp, in], bias [out/tp] (for fused ops).
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  comm::Communicator tp_;
  bool gather_output_;
  Tensor weight_, bias_;
};

/// Input features split over the TP group: rank t owns weight columns [t in/tp, (t+1) in/tp).
/// Partial outputs are all-reduced, then the (replicated) bias is added once. With sequence
/// parallelism they are reduce-scattered along the sequence instead and the bias is added to
/// this rank's rows (Korthikanti et al. 2022, arXiv:2205.05198, sec. 4.2.2).
/// Throws std::invalid_argument when in is not divisible by tp.
class RowParallelLinear {
 public:
  /// `input_is_parallel`: the input already is this rank's [..., in/tp] shard (as after a
  /// column-parallel layer); otherwise the full input is split here (scatter-to-TP).
  /// `sequence_parallel`: the output is this rank's seq/tp rows (needs input_is_parallel).
  RowParallelLinear(const LinearWeights& master, const comm::Communicator& tp,
                    bool input_is_parallel, bool sequence_parallel = false);
  /// x [..., in/tp] (or [..., in]) -> [..., out], identical on every TP rank:
  /// reduce_and_add_bias(partial(x_t)).
  Tensor forward(const Tensor& x) const;
  /// This rank's partial product x_t W_t^T [..., out] of its input shard x_t [..., in/tp]: float32
  /// (x_t's dtype), or bfloat16 where bf16_partial(x_t).
  Tensor partial(const Tensor& input) const;
  /// The second half of forward: all-reduces this rank's partial product [..., out] over TP
  /// (reduce-from-TP) and adds the bias once, so a fused op can compute the partial product.
  /// With sequence parallelism: partial [batch, seq, out] -> [batch, seq/tp, out]
  /// (reduce_scatter_to_sequence_parallel_region, then the bias).
  Tensor reduce_and_add_bias(const Tensor& partial) const;
  /// Whether this layer writes its partial product of `input` (float32 [..., in/tp]) as
  /// bfloat16, the bits the reduction would round it to: where the reduction carries bfloat16
  /// (reduces_as_bf16, train --bf16 at tp > 1) and the bias is added after it (Megatron-LM's
  /// bfloat16 row-parallel output), through autograd::linear_bf16_output; a fused op that
  /// computes the partial (nn::ParallelMlp's fused_mlp) writes it as bfloat16 too.
  bool bf16_partial(const Tensor& input) const;
  /// "weight" [out, in/tp], "bias" [out] when the layer has one (replicated; its gradient is the
  /// same on every rank, or with sequence parallelism a partial sum marked
  /// Parameter::sequence_parallel).
  Parameters parameters() const;
  /// This rank's weight shard [out, in/tp] (for fused ops).
  const Tensor& weight() const { return weight_; }

 private:
  comm::Communicator tp_;
  bool input_is_parallel_;
  bool sequence_parallel_;
  Tensor weight_, bias_;
};

}  // namespace mpitron::nn
