// train --bf16's float32 masters (Optimizer::keep_float32_masters): the masters start as the
// parameters, every parameter is rounded to bfloat16 at once, each step updates the masters and
// writes them rounded into the elements they hold, and bad ranges are refused. The expected
// values are computed here in double from the update rule and the rounding of kernels/bf16.h.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/weight_operands.h"
#include "kernels/bf16.h"
#include "kernels/ops.h"
#include "nn/optim/adamw.h"
#include "nn/optim/sgd.h"
#include "nn/parameter.h"

namespace mpitron::nn {
namespace {

double rounded(double x) {
  return kernels::bf16_to_float(kernels::to_bf16(static_cast<float>(x)));
}

// w [2, 4] holds 1 + k / 1000 (none of them a bfloat16 value), its gradient 2^-9 everywhere:
// an SGD step of lr 1 moves each element by 2e-3, a quarter of a bfloat16 ulp at 1 (2^-7).
struct Model {
  Tensor w = Tensor::from_vector({1.001, 1.002, 1.003, 1.004, 1.005, 1.006, 1.007, 1.008}, {2, 4},
                                 DType::f32)
                 .set_requires_grad();
  Model() { w.set_grad(Tensor::full({2, 4}, 1.0 / 512, DType::f32)); }
  Parameters parameters() const { return {{"w", w}}; }
};

TEST(Float32Masters, StepsUpdateTheMastersAndRoundThemIntoTheParameters) {
  const Model model;
  const std::vector<double> initial = model.w.to_vector();
  Sgd sgd(model.parameters(), 1.0);
  sgd.keep_float32_masters({{2, 6}});  // the elements a distributed optimizer's rank owns
  ASSERT_TRUE(sgd.has_masters());
  std::vector<double> master(initial.begin() + 2, initial.begin() + 6);
  EXPECT_EQ(sgd.masters().at(0).to_vector(), master);
  std::vector<double> parameter;
  for (const double v : initial)
    parameter.push_back(rounded(v));
  EXPECT_EQ(model.w.to_vector(), parameter);  // every element, owned or not
  for (int step = 0; step < 8; ++step) {
    sgd.step();
    for (std::size_t i = 0; i < master.size(); ++i) {
      master[i] = static_cast<float>(master[i] - 1.0 / 512);
      parameter[i + 2] = rounded(master[i]);
    }
    EXPECT_EQ(sgd.masters().at(0).to_vector(), master) << "step " << step + 1;
    EXPECT_EQ(model.w.to_vector(), parameter) << "step " << step + 1;
  }
  // Eight quarter-ulp steps moved every master by 2 ulps of bfloat16 at 1, so the parameters
  // they round into moved too, while the elements no master holds kept their first rounding.
  EXPECT_NE(parameter[2], rounded(initial[2]));
  EXPECT_EQ(parameter[0], rounded(initial[0]));
}

TEST(Float32Masters, BadRangesAreRefused) {
  const Model model;
  Sgd sgd(model.parameters(), 1.0);
  EXPECT_THROW(sgd.keep_float32_masters({}), std::invalid_argument);
  EXPECT_THROW(sgd.keep_float32_masters({{4, 9}}), std::invalid_argument);
  EXPECT_THROW(sgd.keep_float32_masters({{5, 4}}), std::invalid_argument);
  const Tensor f64 = Tensor::full({2}, 1.0, DType::f64).set_requires_grad();
  Sgd float64({{"b", f64}}, 1.0);
  EXPECT_THROW(float64.keep_float32_masters({{0, 2}}), std::invalid_argument);
  sgd.keep_float32_masters({{0, 8}});
  EXPECT_THROW(sgd.keep_float32_masters({{0, 8}}), std::logic_error);
}

// AdamW updates its own shards; masters over other ranges are a programming error the step
// names instead of updating the wrong elements.
TEST(Float32Masters, AdamWRefusesMastersOfOtherElementsThanItsShards) {
  const Model model;
  AdamW adamw(model.parameters(), 1e-3, {}, {{0, 4}});
  adamw.keep_float32_masters({{4, 8}});
  EXPECT_THROW(adamw.step(), std::logic_error);
}

// AdamW on CPU updates a large shard and rounds it into the parameter in pieces (2^18 elements:
// here three, the last partial, from an offset inside the parameter): the masters have the bits
// of AdamW without masters on the same values, and the shard's elements of the parameter are
// those masters rounded; the elements outside it keep their first rounding.
TEST(Float32Masters, AdamWUpdatesAndRoundsALargeShardPieceByPiece) {
  const std::int64_t rows = 600, cols = 1000, first = 100, last = rows * cols - 50;
  std::vector<double> values, gradient;
  for (std::int64_t e = 0; e < rows * cols; ++e) {
    values.push_back(1.0 + static_cast<double>(e % 997) / 997.0);
    gradient.push_back(static_cast<double>(e % 101 - 50) / 4096.0);
  }
  Tensor w = Tensor::from_vector(values, {rows, cols}, DType::f32).set_requires_grad();
  w.set_grad(Tensor::from_vector(gradient, {rows, cols}, DType::f32));
  AdamWOptions no_decay;  // w is a matrix and plain a vector: neither decays
  no_decay.weight_decay = 0.0;
  AdamW adamw({{"w", w}}, 1e-2, no_decay, {{first, last}});
  adamw.keep_float32_masters({{first, last}});
  Tensor plain = Tensor::from_vector({values.begin() + first, values.begin() + last},
                                     {last - first}, DType::f32)
                     .set_requires_grad();
  plain.set_grad(Tensor::from_vector({gradient.begin() + first, gradient.begin() + last},
                                     {last - first}, DType::f32));
  AdamW reference({{"plain", plain}}, 1e-2, no_decay);
  for (int step = 0; step < 2; ++step) {
    adamw.step();
    reference.step();
  }
  const std::vector<double> master = adamw.masters().at(0).to_vector(), want = plain.to_vector();
  EXPECT_EQ(master, want);
  const std::vector<double> parameter = w.to_vector();
  for (std::int64_t e = 0; e < rows * cols; ++e) {
    const bool owned = e >= first && e < last;
    ASSERT_EQ(parameter[e],
              rounded(owned ? master[static_cast<std::size_t>(e - first)] : values[e]))
        << "element " << e;
  }
}

// Optimizer::step(&copies) rounds the masters into the kept bfloat16 copy of each parameter
// whose master is whole, in the pieces of its update, and marks it refreshed: the next scope
// hands that copy to GEMMs as it is (a change of the parameter made after the step, which the
// contract forbids, shows it was not rounded again), the scope after rounds again; a shard's
// copy, or a step without `copies`, is rounded again at the next scope.
TEST(Float32Masters, AStepRefreshesTheKeptCopiesOfWholeParameters) {
  const kernels::GemmOperandsScope operands(kernels::GemmOperands::bfloat16);
  const std::int64_t rows = 600, cols = 1000;  // 3 pieces of AdamW's update
  std::vector<double> values, gradient;
  for (std::int64_t e = 0; e < rows * cols; ++e) {
    values.push_back(1.0 + static_cast<double>(e % 997) / 997.0);
    gradient.push_back(static_cast<double>(e % 101 - 50) / 4096.0);
  }
  const auto parameter = [&] {
    Tensor p = Tensor::from_vector(values, {rows, cols}, DType::f32).set_requires_grad();
    p.set_grad(Tensor::from_vector(gradient, {rows, cols}, DType::f32));
    return p;
  };
  Tensor whole = parameter(), shard = parameter();
  const ElementRange shard_range{100, rows * cols - 50};
  AdamW adamw({{"whole", whole}, {"shard", shard}}, 1e-2, AdamWOptions{},
              {{0, rows * cols}, shard_range});
  adamw.keep_float32_masters({{0, rows * cols}, shard_range});
  autograd::Bf16WeightCopies copies;
  {
    const autograd::Bf16WeightScope scope(copies);
    autograd::weight_operand(whole);
    autograd::weight_operand(shard);
  }
  const auto set_first = [](Tensor& p, double x) {
    kernels::Buffer first = kernels::Buffer::view(p.buffer(), 0, 1);
    kernels::fill(first, x);
  };
  const auto expect_copy_is = [&](const Tensor& p, const std::vector<double>& want) {
    const std::vector<double> copy = autograd::weight_operand(p).to_vector();
    ASSERT_EQ(copy.size(), want.size());
    for (std::size_t e = 0; e < want.size(); ++e)
      ASSERT_EQ(copy[e], rounded(want[e])) << "element " << e;
  };
  for (const bool refresh : {true, false}) {
    SCOPED_TRACE(refresh ? "step(&copies)" : "step()");
    adamw.step(refresh ? &copies : nullptr);
    const std::vector<double> stepped = whole.to_vector();
    set_first(whole, 3.0);
    set_first(shard, 3.0);
    {
      const autograd::Bf16WeightScope scope(copies);
      expect_copy_is(whole, refresh ? stepped : whole.to_vector());
      expect_copy_is(shard, shard.to_vector());
    }
    const autograd::Bf16WeightScope scope(copies);
    expect_copy_is(whole, whole.to_vector());
  }
}

// eval --bf16 and generate --bf16 round the loaded weights as the masters' first rounding does:
// round_parameters_to_bf16 leaves the same values as keep_float32_masters, through the shared
// tensor handles, and refuses a float64 parameter.
TEST(Float32Masters, RoundParametersToBf16GivesTheMastersFirstRounding) {
  const Model rounded_here;
  const Model by_masters;
  round_parameters_to_bf16(rounded_here.parameters());
  Sgd sgd(by_masters.parameters(), 1.0);
  sgd.keep_float32_masters({{0, 8}});
  EXPECT_EQ(rounded_here.w.to_vector(), by_masters.w.to_vector());
  EXPECT_NE(rounded_here.w.to_vector(), sgd.masters().at(0).to_vector());  // 1.001 ... moved
  const Tensor wide = Tensor::from_vector({1.001}, {1}, DType::f64);
  try {
    round_parameters_to_bf16({{"wide", wide}});
    FAIL() << "a float64 parameter was rounded";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("wide"), std::string::npos) << e.what();
  }
  EXPECT_EQ(wide.to_vector(), std::vector<double>{1.001});
}

}  // namespace
}  // namespace mpitron::nn
