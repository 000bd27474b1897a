// The pipeline executor over a PP group spanning the world (1, 2 or 4 stages), both schedules,
// 1 to 4 micro-batches (fewer than the stages included), against the dense stack on one rank.
//
// Float64: the pipeline does the dense stack's operations, only split across ranks and
// micro-batches (a gradient is then a sum over micro-batches instead of one GEMM over the batch,
// the loss a sum of micro-batch means), so results agree to rounding, ~1e-15 relative; 1e-12
// leaves margin for that and still catches a lost or repeated micro-batch or a wrong 1/m weight,
// which move results by O(1/m).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <tuple>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "comm/topology.h"
#include "comm/traffic.h"
#include "nn/layers/mlp.h"
#include "nn/parallel/pipeline.h"
#include "nn_test_support.h"

namespace mpitron::nn {
namespace {

using autograd::DType;
using autograd::Tensor;

constexpr double kTolerance = 1e-12;
constexpr std::size_t kLayersPerStage = 2;

Tensor run(const std::vector<Mlp>& stack, Tensor x) {
  for (const Mlp& layer : stack)
    x = layer.forward(x);
  return x;
}

// An MLP stack of kLayersPerStage layers per stage: this rank's stage and the whole dense stack
// built from the same weights, and a batch [12, 3, 6] of inputs and targets.
struct Model {
  explicit Model(const comm::ParallelTopology& topology)
      : first(kLayersPerStage * static_cast<std::size_t>(topology.pp_rank())) {
    for (std::size_t i = 0; i < kLayersPerStage * static_cast<std::size_t>(topology.pp()); ++i) {
      const auto weights = make_mlp_weights(6, 10, 100 + i, 200 + i, DType::f64, kCpu);
      dense.emplace_back(weights);
      if (i >= first && i < first + kLayersPerStage) stage.emplace_back(weights);
    }
  }

  void expect_gradients_of_the_dense_stack() const {
    for (std::size_t i = 0; i < kLayersPerStage; ++i) {
      const Parameters mine = stage[i].parameters(), reference = dense[first + i].parameters();
      for (std::size_t j = 0; j < mine.size(); ++j) {
        SCOPED_TRACE(mine[j].name);
        test::expect_close(mine[j].tensor.grad(), reference[j].tensor.grad(), kTolerance);
      }
    }
  }

  static constexpr autograd::Device kCpu = autograd::Device::cpu;
  std::size_t first;
  std::vector<Mlp> stage, dense;
  Tensor input = autograd::randn({12, 3, 6}, 1, 1.0, DType::f64);
  Tensor target = autograd::randn({12, 3, 6}, 2, 1.0, DType::f64);
};

comm::ParallelTopology pipeline_world() {
  return comm::ParallelTopology(test::world(), 1, test::world().size(), 1);
}

class Pipeline : public ::testing::TestWithParam<std::tuple<ScheduleKind, int>> {};

TEST_P(Pipeline, MseTrainStepMatchesTheDenseStack) {
  const auto [schedule, micro_batches] = GetParam();
  const comm::ParallelTopology topology = pipeline_world();
  const Model model(topology);
  const PipelineShape shape{{12, 3, 6}, micro_batches, DType::f64, Model::kCpu, schedule};
  const auto forward = [&model](const Tensor& x) { return run(model.stage, x); };

  const PipelineResult result =
      pipeline_train_step(topology, shape, forward, model.input, model.target);
  const Tensor inference = pipeline_inference(topology, shape, forward, model.input);
  const Tensor expected = run(model.dense, model.input);
  const Tensor expected_loss = autograd::mse_loss(expected, model.target);
  expected_loss.backward();

  if (topology.is_last_stage()) {
    test::expect_close(result.output, expected.detach(), kTolerance);
    test::expect_close(inference, expected.detach(), kTolerance);
    test::expect_close(result.loss, expected_loss.detach(), kTolerance);
  } else {
    EXPECT_FALSE(result.output.defined());
    EXPECT_FALSE(inference.defined());
  }
  model.expect_gradients_of_the_dense_stack();
}

// The executor's own interface: the stage reads its data by micro-batch index, the last stage
// returns weighted losses, which come back per micro-batch; a micro-batch's activations are
// released once its backward ran, so at most min(pp - stage, m) are alive under 1F1B.
TEST_P(Pipeline, StepReturnsMicroBatchLossesAndReleasesActivations) {
  const auto [schedule, micro_batches] = GetParam();
  const comm::ParallelTopology topology = pipeline_world();
  const Model model(topology);
  const std::int64_t size = 12 / micro_batches;
  const auto slice = [size](const Tensor& t, int i) {
    autograd::NoGradGuard no_grad;
    return autograd::narrow(t, 0, i * size, size);
  };
  const double weight = 1.0 / micro_batches;
  std::vector<std::weak_ptr<autograd::TensorImpl>> alive;
  int peak = 0;
  const PipelineStage stage{[&](int i, int chunk, const Tensor& received) {
    EXPECT_EQ(chunk, 0);
    EXPECT_EQ(received.defined(), !topology.is_first_stage());
    EXPECT_EQ(static_cast<std::size_t>(i) * 2, alive.size()) << "micro-batches out of order";
    int live = 1;  // this one, and every earlier one whose input or output is still referenced
    for (std::size_t j = 0; j < alive.size(); j += 2)
      live += !alive[j].expired() || !alive[j + 1].expired();
    peak = std::max(peak, live);
    const Tensor x = topology.is_first_stage() ? slice(model.input, i) : received;
    Tensor y = run(model.stage, x);
    if (topology.is_last_stage()) {
      y = autograd::scale(autograd::mse_loss(y, slice(model.target, i)), weight);
    }
    alive.emplace_back(received.defined() ? received.impl() : y.impl());
    alive.emplace_back(y.impl());
    return y;
  }};
  const PipelineSpec spec{{size, 3, 6}, micro_batches, schedule, DType::f64, Model::kCpu};
  const std::vector<Tensor> losses = run_pipeline_step(topology, spec, stage);

  const int stages_after = topology.pp() - topology.pp_rank();
  EXPECT_EQ(peak,
            schedule == ScheduleKind::afab ? micro_batches : std::min(stages_after, micro_batches));
  EXPECT_EQ(losses.size(), topology.is_last_stage() ? static_cast<std::size_t>(micro_batches) : 0);
  for (int i = 0; i < micro_batches; ++i) {
    const Tensor reference = autograd::scale(
        autograd::mse_loss(run(model.dense, slice(model.input, i)), slice(model.target, i)),
        weight);
    reference.backward();
    if (topology.is_last_stage()) {
      EXPECT_FALSE(losses[static_cast<std::size_t>(i)].requires_grad());
      test::expect_close(losses[static_cast<std::size_t>(i)], reference.detach(), kTolerance);
    }
  }
  model.expect_gradients_of_the_dense_stack();

  alive.clear();
  const std::vector<Tensor> outputs = run_pipeline_forward(topology, spec, stage);
  EXPECT_EQ(outputs.size(), topology.is_last_stage() ? static_cast<std::size_t>(micro_batches) : 0);
  for (std::size_t i = 0; i < outputs.size(); ++i)
    EXPECT_FALSE(outputs[i].requires_grad());
}

INSTANTIATE_TEST_SUITE_P(SchedulesAndMicroBatches, Pipeline,
                         ::testing::Combine(::testing::Values(ScheduleKind::afab,
                                                              ScheduleKind::one_f_one_b),
                                            ::testing::Values(1, 2, 3, 4)),
                         [](const auto& info) {
                           return (std::get<0>(info.param) == ScheduleKind::afab ? "afab"
                                                                                 : "onefoneb") +
                                  std::string("_m") + std::to_string(std::get<1>(info.param));
                         });

// Interleaved 1F1B (and AFAB over chunks): v chunks of kLayersPerStage layers per stage, chunk c
// of stage s holding virtual stage c pp + s of the dense stack; losses, gradients and the
// forward-only outputs match the dense stack, and each chunk sees the inputs it should.
TEST(PipelineInterleaved, ChunksMatchTheDenseStack) {
  const comm::ParallelTopology topology = pipeline_world();
  if (topology.pp() < 2) GTEST_SKIP() << "interleaving needs two stages";
  const int pp = topology.pp();
  const int per_chunk = static_cast<int>(kLayersPerStage);
  for (ScheduleKind schedule : {ScheduleKind::afab, ScheduleKind::one_f_one_b}) {
    for (const int v : {2, 3}) {
      for (const int micro_batches : {pp, 2 * pp}) {
        if (12 % micro_batches != 0) continue;
        SCOPED_TRACE(to_string(schedule) + " v=" + std::to_string(v) +
                     " m=" + std::to_string(micro_batches));
        std::vector<Mlp> dense;
        std::vector<std::vector<Mlp>> chunks(static_cast<std::size_t>(v));
        for (int layer = 0; layer < per_chunk * pp * v; ++layer) {
          const auto weights =
              make_mlp_weights(6, 10, 100 + layer, 200 + layer, DType::f64, autograd::Device::cpu);
          dense.emplace_back(weights);
          const int virtual_stage = layer / per_chunk;
          if (virtual_stage % pp == topology.pp_rank()) {
            chunks[static_cast<std::size_t>(virtual_stage / pp)].emplace_back(weights);
          }
        }
        const Tensor input = autograd::randn({12, 3, 6}, 1, 1.0, DType::f64);
        const Tensor target = autograd::randn({12, 3, 6}, 2, 1.0, DType::f64);
        const std::int64_t size = 12 / micro_batches;
        const auto slice = [size](const Tensor& t, int i) {
          autograd::NoGradGuard no_grad;
          return autograd::narrow(t, 0, i * size, size);
        };
        const bool last_stage = topology.is_last_stage();
        const PipelineStage stage{[&](int i, int chunk, const Tensor& received) {
          const bool first = topology.is_first_stage() && chunk == 0;
          EXPECT_EQ(received.defined(), !first);
          Tensor y =
              run(chunks[static_cast<std::size_t>(chunk)], first ? slice(input, i) : received);
          if (!last_stage || chunk != v - 1) return y;
          return autograd::scale(autograd::mse_loss(y, slice(target, i)), 1.0 / micro_batches);
        }};
        const PipelineSpec spec{{size, 3, 6}, micro_batches,         schedule,
                                DType::f64,   autograd::Device::cpu, v};
        const std::vector<Tensor> losses = run_pipeline_step(topology, spec, stage);
        ASSERT_EQ(losses.size(), last_stage ? static_cast<std::size_t>(micro_batches) : 0);
        for (int i = 0; i < micro_batches; ++i) {
          const Tensor reference =
              autograd::scale(autograd::mse_loss(run(dense, slice(input, i)), slice(target, i)),
                              1.0 / micro_batches);
          reference.backward();
          if (last_stage) {
            test::expect_close(losses[static_cast<std::size_t>(i)], reference.detach(), kTolerance);
          }
        }
        for (int layer = 0; layer < per_chunk * pp * v; ++layer) {
          const int virtual_stage = layer / per_chunk;
          if (virtual_stage % pp != topology.pp_rank()) continue;
          const Mlp& mine = chunks[static_cast<std::size_t>(virtual_stage / pp)]
                                  [static_cast<std::size_t>(layer) % kLayersPerStage];
          const Parameters ours = mine.parameters();
          const Parameters theirs = dense[static_cast<std::size_t>(layer)].parameters();
          for (std::size_t j = 0; j < ours.size(); ++j) {
            SCOPED_TRACE("layer " + std::to_string(layer) + " " + ours[j].name);
            test::expect_close(ours[j].tensor.grad(), theirs[j].tensor.grad(), kTolerance);
          }
        }
        const std::vector<Tensor> outputs = run_pipeline_forward(topology, spec, stage);
        ASSERT_EQ(outputs.size(), losses.size());
        for (std::size_t i = 0; i < outputs.size(); ++i)
          test::expect_close(outputs[i], losses[i], kTolerance);
      }
    }
  }
}

// The last stage ignores its input, so backward never reaches it: zeros go upstream, and the
// first stage's parameter (its output, received gradient accumulated into it) gets zeros.
TEST(PipelineGradients, AnInputBackwardDidNotReachSendsZeros) {
  const comm::ParallelTopology topology = pipeline_world();
  Tensor first = Tensor::full({2, 3}, 1.5, DType::f64).set_requires_grad();
  Tensor last = Tensor::full({2, 3}, 2.0, DType::f64).set_requires_grad();
  const PipelineStage stage{[&](int, int, const Tensor& input) {
    if (topology.is_last_stage())
      return autograd::mse_loss(last, Tensor::zeros({2, 3}, DType::f64));
    return topology.is_first_stage() ? first : input;
  }};
  for (ScheduleKind schedule : {ScheduleKind::afab, ScheduleKind::one_f_one_b}) {
    first.set_grad(Tensor());
    last.set_grad(Tensor());
    run_pipeline_step(topology, PipelineSpec{{2, 3}, 2, schedule, DType::f64}, stage);
    if (topology.is_last_stage()) {
      // d/dw of mean(w^2) = 2w/6 per micro-batch, two micro-batches.
      test::expect_close(last.grad(), Tensor::full({2, 3}, 4.0 / 3.0, DType::f64), kTolerance);
    } else if (topology.is_first_stage()) {
      test::expect_close(first.grad(), Tensor::zeros({2, 3}, DType::f64), 0.0);
    }
  }
}

// train --bf16's wire (PipelineSpec::bf16_wire): the float32 activations travel as bfloat16 and
// their gradients come back the same way. Each stage multiplies by its own weight, so the dense
// stack with autograd::round_through_bf16 between the stages, run micro-batch by micro-batch,
// does the same float32 operations on the same values in the same order: losses and weight
// gradients equal bit for bit. The float32 wire computes on the unrounded values and misses them.
// Every send's payload counts 2 bytes an element instead of 4.
TEST(PipelineBf16Wire, StagesComputeOnRoundedActivationsAndGradients) {
  const comm::ParallelTopology topology = pipeline_world();
  if (topology.pp() < 2) GTEST_SKIP() << "nothing crosses a stage boundary";
  const int pp = topology.pp(), stage = topology.pp_rank(), m = 2;
  const autograd::Shape micro{3, 4, 5};
  const Tensor input = autograd::randn({6, 4, 5}, 1), target = autograd::randn({6, 4, 5}, 2);
  const auto micro_batch = [&micro](const Tensor& t, int i) {
    return t.flat_view(i * autograd::numel_of(micro), micro);
  };
  const auto stage_weight = [&micro](int s) {
    return autograd::randn(micro, 10 + static_cast<std::uint64_t>(s)).set_requires_grad();
  };
  std::vector<Tensor> dense;
  for (int s = 0; s < pp; ++s)
    dense.push_back(stage_weight(s));
  std::vector<double> expected_losses;
  for (int i = 0; i < m; ++i) {
    Tensor x = micro_batch(input, i);
    for (int s = 0; s < pp; ++s) {
      x = autograd::mul(x, dense[static_cast<std::size_t>(s)]);
      if (s + 1 < pp) x = autograd::round_through_bf16(x);
    }
    const Tensor loss = autograd::scale(autograd::mse_loss(x, micro_batch(target, i)), 1.0 / m);
    loss.backward();
    expected_losses.push_back(loss.item());
  }
  const Tensor& expected_grad = dense[static_cast<std::size_t>(stage)].grad();
  // Sends per micro-batch: the activation forward (all but the last stage), the gradient back
  // (all but the first).
  const std::uint64_t sends =
      static_cast<std::uint64_t>(m) * ((stage + 1 < pp) + (stage > 0)) * autograd::numel_of(micro);

  for (const bool bf16_wire : {true, false}) {
    SCOPED_TRACE(bf16_wire ? "bfloat16 wire" : "float32 wire");
    const Tensor weight = stage_weight(stage);
    const PipelineStage compute{[&](int i, int, const Tensor& received) {
      const Tensor y =
          autograd::mul(topology.is_first_stage() ? micro_batch(input, i) : received, weight);
      if (!topology.is_last_stage()) return y;
      return autograd::scale(autograd::mse_loss(y, micro_batch(target, i)), 1.0 / m);
    }};
    PipelineSpec spec{micro, m, ScheduleKind::one_f_one_b};
    spec.bf16_wire = bf16_wire;
    const comm::Traffic before = comm::traffic();
    const std::vector<Tensor> losses = run_pipeline_step(topology, spec, compute);
    EXPECT_EQ(comm::traffic_since(before, comm::traffic())[topology.pp_comm().name()],
              sends * (bf16_wire ? 2u : 4u));
    if (bf16_wire) {
      EXPECT_EQ(weight.grad().to_vector(), expected_grad.to_vector());
      for (std::size_t i = 0; i < losses.size(); ++i)
        EXPECT_EQ(losses[i].item(), expected_losses[i]) << "micro-batch " << i;
    } else {
      EXPECT_NE(weight.grad().to_vector(), expected_grad.to_vector());
    }
  }
  // Two stages that disagree on the wire: the receiver names both dtypes, and the sender's
  // payload is drained, so its send completes.
  if (pp == 2) {
    PipelineSpec mixed{micro, 1};
    mixed.bf16_wire = topology.is_first_stage();
    const PipelineStage pass{[&](int, int, const Tensor& received) {
      return topology.is_first_stage() ? micro_batch(input, 0) : received;
    }};
    if (topology.is_first_stage()) {
      run_pipeline_forward(topology, mixed, pass);
    } else {
      std::string message;
      try {
        run_pipeline_forward(topology, mixed, pass);
      } catch (const std::runtime_error& e) {
        message = e.what();
      }
      const int sender = topology.pp_comm().global_rank(0);
      EXPECT_NE(message.find(fmt::format("expected [3, 4, 5] float32 from rank {}, but rank {} "
                                         "sent [3, 4, 5] bfloat16",
                                         sender, sender)),
                std::string::npos)
          << message;
    }
  }
  // A bfloat16 wire carries float32 activations only.
  PipelineSpec float64{micro, m, ScheduleKind::one_f_one_b, DType::f64};
  float64.bf16_wire = true;
  const PipelineStage identity{[](int, int, const Tensor& x) { return x; }};
  EXPECT_THROW(run_pipeline_step(topology, float64, identity), std::invalid_argument);
}

TEST(PipelineShapes, BadSizesAreRejected) {
  const comm::ParallelTopology topology = pipeline_world();
  const PipelineShape shape{{4, 3, 6}, 3, DType::f64, autograd::Device::cpu};
  const auto identity = [](const Tensor& x) { return x; };
  EXPECT_THROW(pipeline_inference(topology, shape, identity, Tensor::zeros({4, 3, 6}, DType::f64)),
               std::invalid_argument);
  const PipelineStage stage{[](int, int, const Tensor&) { return Tensor::zeros({3}, DType::f64); }};
  EXPECT_THROW(run_pipeline_step(topology, PipelineSpec{{2}, 0}, stage), std::invalid_argument);
  // Interleaving needs micro-batches a multiple of pp (and two stages at least).
  const PipelineSpec interleaved{{2}, topology.pp() + 1, {}, DType::f64, autograd::Device::cpu, 2};
  EXPECT_THROW(run_pipeline_step(topology, interleaved, stage), std::invalid_argument);
  // A stage whose output is not the exchanged activation fails before sending anything.
  if (topology.pp() > 1 && topology.is_first_stage()) {
    EXPECT_THROW(run_pipeline_forward(topology, PipelineSpec{{2}, 1, {}, DType::f64}, stage),
                 std::invalid_argument);
  }
}

}  // namespace
}  // namespace mpitron::nn
