#include "app/validate/mlp_checks.h"

#include "autograd/function.h"
#include "autograd/ops.h"
#include "nn/parallel/data_parallel.h"
#include "nn/parallel/pipeline.h"

namespace mpitron::app {

using autograd::Tensor;

namespace {

nn::PipelineShape pipeline_shape(const ValidateContext& ctx) {
  return {{ctx.sizes.batch, ctx.sizes.seq, ctx.sizes.hidden},
          ctx.sizes.micro_batches,
          autograd::DType::f32,
          ctx.device,
          ctx.schedule};
}

}  // namespace

std::vector<LocalCheck> check_tensor_parallel(const ValidateContext& ctx) {
  const comm::ParallelTopology& topo = ctx.topology;
  const nn::MlpStack<nn::ParallelMlp> parallel(stack_init(ctx, 11, 12), 0, 1, topo.tp_comm());
  const nn::MlpStack<nn::Mlp> dense(stack_init(ctx, 11, 12), 0, 1);
  log_parameters(ctx.log, "tp shards", parallel.parameters());
  const Tensor input = make_activation(ctx, 13, 1.0);
  const Tensor target = make_activation(ctx, 14, 0.5);

  LocalCheck inference{"TP: inference forward matches dense reference", Comparison(ctx.tolerance),
                       ""};
  {
    autograd::NoGradGuard no_grad;
    inference.comparison.expect_close(parallel.forward(input), dense.forward(input));
  }

  LocalCheck training{"TP: training loss and gradients match dense reference",
                      Comparison(ctx.tolerance), ""};
  Tensor parallel_input = input.clone().set_requires_grad();
  Tensor dense_input = input.clone().set_requires_grad();
  const Tensor loss = autograd::mse_loss(parallel.forward(parallel_input), target);
  const Tensor reference_loss = autograd::mse_loss(dense.forward(dense_input), target);
  loss.backward();
  reference_loss.backward();
  training.comparison.expect_close(loss, reference_loss);
  training.comparison.expect_close(parallel_input.grad(), dense_input.grad());
  expect_gradients(training.comparison, parallel.parameters(), dense.parameters(), topo.tp_rank(),
                   topo.tp(), 1.0);
  inference.trivial = training.trivial = trivial_at("tp", topo.tp());
  return {inference, training};
}

std::vector<LocalCheck> check_pipeline_parallel(const ValidateContext& ctx) {
  const comm::ParallelTopology& topo = ctx.topology;
  const std::int64_t per_stage = ctx.sizes.layers / topo.pp();
  const std::int64_t first = topo.pp_rank() * per_stage;
  const nn::MlpStack<nn::Mlp> stage(stack_init(ctx, 300, 400), first, per_stage);
  const nn::MlpStack<nn::Mlp> dense(stack_init(ctx, 300, 400), 0, ctx.sizes.layers);
  log_parameters(ctx.log, "pp stage", stage.parameters());
  const Tensor input = make_activation(ctx, 41, 1.0);
  const Tensor target = make_activation(ctx, 42, 0.5);
  const auto stage_forward = [&stage](const Tensor& x) { return stage.forward(x); };

  const nn::PipelineResult result =
      nn::pipeline_train_step(topo, pipeline_shape(ctx), stage_forward, input, target);
  const Tensor output = nn::pipeline_inference(topo, pipeline_shape(ctx), stage_forward, input);
  const Tensor reference_output = dense.forward(input);
  const Tensor reference_loss = autograd::mse_loss(reference_output, target);
  reference_loss.backward();

  const std::string prefix = micro_batch_prefix("PP", ctx.sizes.micro_batches, ctx.schedule);
  LocalCheck inference{prefix + "inference forward matches dense reference",
                       Comparison(ctx.tolerance), ""};
  LocalCheck training{prefix + "loss and every stage gradient match dense reference",
                      Comparison(ctx.tolerance), ""};
  if (topo.is_last_stage()) {
    inference.comparison.expect_close(output, reference_output.detach());
    training.comparison.expect_close(result.loss, reference_loss);
  }
  expect_gradients(training.comparison, stage.parameters(), dense.parameters(), 0, 1, 1.0);
  if (topo.pp() == 1 && ctx.sizes.micro_batches == 1) inference.trivial = training.trivial = "pp 1";
  return {inference, training};
}

std::vector<LocalCheck> check_data_parallel(const ValidateContext& ctx) {
  const comm::ParallelTopology& topo = ctx.topology;
  const nn::MlpStack<nn::Mlp> replica(stack_init(ctx, 51, 52), 0, 1);
  const nn::MlpStack<nn::Mlp> dense(stack_init(ctx, 51, 52), 0, 1);
  log_parameters(ctx.log, "dp replica", replica.parameters());
  const auto d = static_cast<std::uint64_t>(topo.dp_rank());
  autograd::mse_loss(replica.forward(make_activation(ctx, 3000 + d, 1.0)),
                     make_activation(ctx, 4000 + d, 0.5))
      .backward();
  nn::DataParallelGradients(replica.parameters(), topo.dp_comm()).finish();

  for (int r = 0; r < topo.dp(); ++r) {
    const auto batch = static_cast<std::uint64_t>(r);
    autograd::mse_loss(dense.forward(make_activation(ctx, 3000 + batch, 1.0)),
                       make_activation(ctx, 4000 + batch, 0.5))
        .backward();
  }
  LocalCheck averaged{"DP: averaged gradients match all-batch reference", Comparison(ctx.tolerance),
                      ""};
  expect_gradients(averaged.comparison, replica.parameters(), dense.parameters(), 0, 1,
                   1.0 / topo.dp());
  averaged.trivial = trivial_at("dp", topo.dp());
  return {averaged};
}

std::vector<LocalCheck> check_combined(const ValidateContext& ctx) {
  const comm::ParallelTopology& topo = ctx.topology;
  const std::int64_t per_stage = ctx.sizes.layers / topo.pp();
  const std::int64_t first = topo.pp_rank() * per_stage;
  const nn::MlpStack<nn::ParallelMlp> stage(stack_init(ctx, 600, 700), first, per_stage,
                                            topo.tp_comm());
  const nn::MlpStack<nn::Mlp> dense(stack_init(ctx, 600, 700), 0, ctx.sizes.layers);
  const nn::Parameters stage_parameters = stage.parameters();
  log_parameters(ctx.log, "combined stage shards", stage_parameters);
  const auto d = static_cast<std::uint64_t>(topo.dp_rank());
  // Small buckets, so that several all-reduces start while backward runs.
  nn::DataParallelGradients dp_gradients(stage_parameters, topo.dp_comm(), 64);
  dp_gradients.set_backward_passes(ctx.sizes.micro_batches);
  const nn::PipelineResult result = nn::pipeline_train_step(
      topo, pipeline_shape(ctx), [&stage](const Tensor& x) { return stage.forward(x); },
      make_activation(ctx, 1000 + d, 1.0), make_activation(ctx, 2000 + d, 0.5));
  dp_gradients.finish();

  const std::string prefix = micro_batch_prefix("COMBINED", ctx.sizes.micro_batches, ctx.schedule);
  LocalCheck output{prefix + "TP+PP forward output matches dense reference",
                    Comparison(ctx.tolerance), ""};
  LocalCheck loss{prefix + "TP+PP loss matches dense reference", Comparison(ctx.tolerance), ""};
  LocalCheck gradients{prefix + "TP+PP+DP gradients match dense reference",
                       Comparison(ctx.tolerance), ""};
  for (int r = 0; r < topo.dp(); ++r) {
    const auto batch = static_cast<std::uint64_t>(r);
    const Tensor reference_output = dense.forward(make_activation(ctx, 1000 + batch, 1.0));
    const Tensor reference_loss =
        autograd::mse_loss(reference_output, make_activation(ctx, 2000 + batch, 0.5));
    reference_loss.backward();
    if (r == topo.dp_rank() && topo.is_last_stage()) {
      output.comparison.expect_close(result.output, reference_output.detach());
      loss.comparison.expect_close(result.loss, reference_loss.detach());
    }
  }
  expect_gradients(gradients.comparison, stage_parameters, dense.parameters(), topo.tp_rank(),
                   topo.tp(), 1.0 / topo.dp());
  if (topo.tp() == 1 && topo.pp() == 1 && ctx.sizes.micro_batches == 1) {
    output.trivial = loss.trivial = "tp 1, pp 1";
    if (topo.dp() == 1) gradients.trivial = "tp 1, pp 1, dp 1";
  }
  return {output, loss, gradients};
}

}  // namespace mpitron::app
