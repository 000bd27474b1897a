// A tensor-parallel MLP written against mpitron's public API: every rank of the job holds one
// shard of the MLP (column-parallel fc1, row-parallel fc2), trains it a few SGD steps, and checks
// each step's loss and its final shard against the same MLP trained densely on this rank.
// Exit code 0 when every rank agrees with its dense twin, 1 otherwise.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "comm/agreement.h"
#include "comm/environment.h"
#include "comm/guard.h"
#include "nn/layers/mlp.h"
#include "nn/optim/sgd.h"

namespace {

using namespace mpitron;

constexpr int kSteps = 5;
constexpr double kLr = 0.1;
// float64 throughout: the sharded and the dense model differ only in the order of the sums
// inside the row-parallel all-reduce (~1e-16 relative per step), far below this bound, while a
// wrong shard or a missing reduction is off by O(0.01).
constexpr double kTolerance = 1e-10;

double max_abs_difference(const autograd::Tensor& a, const autograd::Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double worst = x.size() == y.size() ? 0.0 : INFINITY;
  for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i)
    worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

int run(const comm::Communicator& tp) {
  const std::int64_t hidden = 8, intermediate = 4 * tp.size();
  const nn::MlpWeights master =
      nn::make_mlp_weights(hidden, intermediate, 1, 2, autograd::DType::f64, autograd::Device::cpu);
  const nn::ParallelMlp parallel(master, tp);
  const nn::Mlp dense(master);
  nn::Sgd parallel_sgd(parallel.parameters(), kLr), dense_sgd(dense.parameters(), kLr);

  // One fixed batch, so the loss falls step by step.
  const auto x = autograd::randn({4, hidden}, 100, 1.0, autograd::DType::f64);
  const auto y = autograd::randn({4, hidden}, 200, 1.0, autograd::DType::f64);
  double worst = 0.0;
  for (int step = 0; step < kSteps; ++step) {
    parallel_sgd.zero_grad();
    dense_sgd.zero_grad();
    const autograd::Tensor loss = autograd::mse_loss(parallel.forward(x), y);
    const autograd::Tensor dense_loss = autograd::mse_loss(dense.forward(x), y);
    loss.backward();
    dense_loss.backward();
    parallel_sgd.step();
    dense_sgd.step();
    worst = std::max(worst, std::abs(loss.item() - dense_loss.item()));
    if (tp.rank() == 0) {
      std::printf("step %d: loss %.6f (dense %.6f)\n", step + 1, loss.item(), dense_loss.item());
    }
  }
  // This rank's shards against the matching slices of the dense parameters.
  autograd::NoGradGuard no_grad;
  const nn::Parameters shards = parallel.parameters(), full = dense.parameters();
  const std::int64_t width = intermediate / tp.size(), first = tp.rank() * width;
  worst = std::max(
      {worst,
       max_abs_difference(shards[0].tensor, autograd::narrow(full[0].tensor, 0, first, width)),
       max_abs_difference(shards[1].tensor, autograd::narrow(full[1].tensor, 0, first, width)),
       max_abs_difference(shards[2].tensor, autograd::narrow(full[2].tensor, 1, first, width)),
       max_abs_difference(shards[3].tensor, full[3].tensor)});

  worst = comm::all_reduce_scalar(tp, worst, comm::ReduceOp::max);
  const bool ok = worst <= kTolerance;
  if (tp.rank() == 0) {
    std::printf(
        "tp_mlp: %d SGD steps on %d ranks %s the dense MLP (max |difference| %.3g, "
        "tolerance %.0e)\n",
        kSteps, tp.size(), ok ? "match" : "DO NOT match", worst, kTolerance);
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  comm::Environment environment(argc, argv);
  const comm::Communicator& world = environment.world();
  return comm::run_guarded(world, [&] { return run(world); });
}
