#include "app/validate/attention_checks.h"

#include <algorithm>

#include "autograd/ops.h"
#include "nn/layers/attention.h"

namespace mpitron::app {

using autograd::Tensor;

std::vector<LocalCheck> check_tensor_parallel_attention(const ValidateContext& ctx) {
  const comm::ParallelTopology& topo = ctx.topology;
  const std::int64_t hidden = ctx.sizes.hidden;
  const std::int64_t heads = hidden % (2 * topo.tp()) == 0 ? 2 * topo.tp() : topo.tp();
  const nn::AttentionWeights weights =
      nn::make_attention_weights_normal(hidden, ctx.seed + 800, autograd::DType::f32, ctx.device);
  const nn::ParallelMultiHeadAttention parallel(weights, heads, topo.tp_comm());
  const nn::MultiHeadAttention dense(weights, heads);
  log_parameters(ctx.log, "tp attention shards", parallel.parameters());
  const Tensor input = make_activation(ctx, 81, 1.0);
  const Tensor target = make_activation(ctx, 82, 0.5);

  LocalCheck check{"TP: attention forward and gradients match dense reference",
                   Comparison(ctx.tolerance), ""};
  Tensor parallel_input = input.clone().set_requires_grad();
  Tensor dense_input = input.clone().set_requires_grad();
  const Tensor output = parallel.forward(parallel_input);
  const Tensor reference = dense.forward(dense_input);
  const Tensor loss = autograd::mse_loss(output, target);
  const Tensor reference_loss = autograd::mse_loss(reference, target);
  loss.backward();
  reference_loss.backward();
  check.comparison.expect_close(output.detach(), reference.detach());
  check.comparison.expect_close(loss.detach(), reference_loss.detach());
  check.comparison.expect_close(parallel_input.grad(), dense_input.grad());
  // Every parameter's gradient against the dense one's slice, but k's bias: its gradient is
  // exactly zero in exact arithmetic (adding q . b_k to every score of a row leaves its softmax
  // unchanged), so both sides are rounding noise: each is compared with zero, absolutely,
  // instead of with the other relative to the noise's scale.
  const auto is_k_bias = [](const nn::Parameter& p) { return p.name == "k.bias"; };
  nn::Parameters compared = parallel.parameters();
  std::erase_if(compared, is_k_bias);
  expect_gradients(check.comparison, compared, dense.parameters(), topo.tp_rank(), topo.tp(), 1.0);
  for (const nn::Parameters& params : {parallel.parameters(), dense.parameters()}) {
    const Tensor& k_bias = std::find_if(params.begin(), params.end(), is_k_bias)->tensor;
    check.comparison.expect_close(k_bias.grad(),
                                  Tensor::zeros(k_bias.shape(), k_bias.dtype(), k_bias.device()));
  }
  check.trivial = trivial_at("tp", topo.tp());
  return {check};
}

}  // namespace mpitron::app
