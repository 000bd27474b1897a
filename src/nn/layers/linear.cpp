#include "nn/layers/linear.h"

#include "autograd/ops.h"
#include "nn/fault_injection.h"
#include "nn/layers/tp_mappings.h"

namespace mpitron::nn {

namespace {

// A layer's parameters: weight along `weight_dim`, then the bias (if any) as given.
Parameters with_bias(const Tensor& weight, int weight_dim, const Tensor& bias, int bias_dim,
                     bool bias_sequence_parallel = false) {
  Parameters all{{"weight", weight, weight_dim}};
  if (bias.defined()) all.push_back({"bias", bias, bias_dim, false, bias_sequence_parallel});
  return all;
}

Tensor replicate_if_defined(const Tensor& t) {
  return t.defined() ? replicate(t) : Tensor();
}

}  // namespace

Linear::Linear(const LinearWeights& weights)
    : weight_(replicate(weights.weight)), bias_(replicate_if_defined(weights.bias)) {}

Tensor Linear::forward(const Tensor& x) const {
  return autograd::linear(x, weight_, bias_);
}

Parameters Linear::parameters() const {
  return with_bias(weight_, kReplicated, bias_, kReplicated);
}

ColumnParallelLinear::ColumnParallelLinear(const LinearWeights& master,
                                           const comm::Communicator& tp, bool gather_output)
    : tp_(tp),
      gather_output_(gather_output),
      weight_(shard(master.weight, 0, tp.rank(), tp.size(), "ColumnParallelLinear out_features")),
      bias_(master.bias.defined()
                ? shard(master.bias, 0, tp.rank(), tp.size(), "ColumnParallelLinear out_features")
                : Tensor()) {}

Tensor ColumnParallelLinear::forward(const Tensor& x) const {
  Tensor y = autograd::linear(copy_to_tp(x, tp_), weight_, bias_);
  return gather_output_ ? gather_from_tp(y, tp_) : y;
}

Parameters ColumnParallelLinear::parameters() const {
  return with_bias(weight_, 0, bias_, 0);
}

RowParallelLinear::RowParallelLinear(const LinearWeights& master, const comm::Communicator& tp,
                                     bool input_is_parallel, bool sequence_parallel)
    : tp_(tp),
      input_is_parallel_(input_is_parallel),
      sequence_parallel_(sequence_parallel),
      weight_(shard(master.weight, 1, tp.rank(), tp.size(), "RowParallelLinear in_features")),
      bias_(replicate_if_defined(master.bias)) {}

Tensor RowParallelLinear::forward(const Tensor& x) const {
  const Tensor input = input_is_parallel_ ? x : scatter_to_tp(x, tp_);
  return reduce_and_add_bias(partial(input));
}

Tensor RowParallelLinear::partial(const Tensor& input) const {
  return bf16_partial(input) ? autograd::linear_bf16_output(input, weight_)
                             : autograd::linear(input, weight_);
}

bool RowParallelLinear::bf16_partial(const Tensor& input) const {
  return input.dtype() == autograd::DType::f32 && reduces_as_bf16(input.device(), tp_) &&
         !(bias_.defined() && fault_active(Fault::row_bias_every_rank));
}

Tensor RowParallelLinear::reduce_and_add_bias(const Tensor& partial) const {
  if (!bias_.defined()) return exit_tp_region(partial, tp_, sequence_parallel_);
  if (fault_active(Fault::row_bias_every_rank)) {
    return exit_tp_region(autograd::add(partial, bias_), tp_, sequence_parallel_);
  }
  return autograd::add(exit_tp_region(partial, tp_, sequence_parallel_), bias_);
}

Parameters RowParallelLinear::parameters() const {
  return with_bias(weight_, 1, bias_, kReplicated, sequence_parallel_);
}

}  // namespace mpitron::nn
