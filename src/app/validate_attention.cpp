#include "app/validate_attention.h"

#include "autograd/ops.h"
#include "nn/attention.h"

namespace mpitron::app {

using autograd::Tensor;

namespace {

nn::Parameters pick(const nn::Parameters& all, std::initializer_list<std::size_t> positions) {
  nn::Parameters some;
  for (std::size_t i : positions)
    some.push_back(all[i]);
  return some;
}

}  // namespace

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
  // Parameters are q.w, q.b, k.w, k.b, v.w, v.b, out.w, out.b. q/k/v are column-parallel like an
  // MLP's fc1 and out is row-parallel like its fc2, so each group below has the MLP's shard
  // layout (fc1.w rows, fc1.b rows, fc2.w columns, fc2.b replicated).
  // k's bias gradient is exactly zero in exact arithmetic (adding q . b_k to every score of a
  // row leaves its softmax unchanged), so both sides are rounding noise: each is compared with
  // zero, absolutely, instead of with the other relative to the noise's scale.
  const nn::Parameters local = parallel.parameters(), full = dense.parameters();
  for (const auto& group : {std::initializer_list<std::size_t>{0, 1, 6, 7}, {2}, {4, 5}}) {
    expect_mlp_gradients(check.comparison, pick(local, group), pick(full, group), topo.tp_rank(),
                         topo.tp(), 1.0);
  }
  for (const autograd::Tensor& k_bias : {local[3].tensor, full[3].tensor}) {
    check.comparison.expect_close(k_bias.grad(),
                                  Tensor::zeros(k_bias.shape(), k_bias.dtype(), k_bias.device()));
  }
  check.trivial = trivial_at("tp", topo.tp());
  return {check};
}

}  // namespace mpitron::app
