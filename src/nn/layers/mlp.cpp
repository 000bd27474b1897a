#include "nn/layers/mlp.h"

#include "autograd/ops.h"
#include "nn/layers/tp_mappings.h"

namespace mpitron::nn {

MlpWeights make_mlp_weights(std::int64_t hidden, std::int64_t intermediate, std::uint64_t fc1_seed,
                            std::uint64_t fc2_seed, DType dtype, Device device) {
  return {make_linear_weights(intermediate, hidden, fc1_seed, dtype, device),
          make_linear_weights(hidden, intermediate, fc2_seed, dtype, device),
          {}};
}

namespace {
Parameters named(const Parameters& fc1, const Parameters& fc2, const Parameters& gate = {}) {
  Parameters all;
  append_parameters(all, "gate", gate);
  append_parameters(all, "fc1", fc1);
  append_parameters(all, "fc2", fc2);
  return all;
}
}  // namespace

Mlp::Mlp(const MlpWeights& weights, GeluForm gelu)
    : fc1_(weights.fc1), fc2_(weights.fc2), gelu_(gelu) {}

Tensor Mlp::forward(const Tensor& x) const {
  return autograd::add(autograd::fused_mlp(x, fc1_.weight(), fc1_.bias(), fc2_.weight(), gelu_),
                       fc2_.bias());
}

Parameters Mlp::parameters() const {
  return named(fc1_.parameters(), fc2_.parameters());
}

ParallelMlp::ParallelMlp(const MlpWeights& master, const comm::Communicator& tp, GeluForm gelu,
                         bool sequence_parallel)
    : tp_(tp),
      gate_(master.gate.weight.defined()
                ? std::optional<ColumnParallelLinear>(std::in_place, master.gate, tp, false)
                : std::nullopt),
      fc1_(master.fc1, tp, /*gather_output=*/false),
      fc2_(master.fc2, tp, /*input_is_parallel=*/true, sequence_parallel),
      gelu_(gelu),
      sequence_parallel_(sequence_parallel) {}

Tensor ParallelMlp::forward(const Tensor& x) const {
  const Tensor input = enter_tp_region(x, tp_, sequence_parallel_);
  if (gate_) {
    const Tensor operand = autograd::gemm_operand(input);  // one copy for gate and up
    const Tensor hidden =
        autograd::swiglu(autograd::linear(input, gate_->weight(), gate_->bias(), operand),
                         autograd::linear(input, fc1_.weight(), fc1_.bias(), operand));
    return fc2_.reduce_and_add_bias(fc2_.partial(hidden));
  }
  const Tensor partial = autograd::fused_mlp(input, fc1_.weight(), fc1_.bias(), fc2_.weight(),
                                             gelu_, fc2_.bf16_partial(input));
  return fc2_.reduce_and_add_bias(partial);
}

Parameters ParallelMlp::parameters() const {
  return named(fc1_.parameters(), fc2_.parameters(), gate_ ? gate_->parameters() : Parameters{});
}

}  // namespace mpitron::nn
