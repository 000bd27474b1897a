#include "app/validate_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/random.h"

namespace mpitron::app {

std::vector<int> default_micro_batch_runs(std::int64_t batch, int pp) {
  std::vector<int> runs{1};
  for (std::int64_t m = std::max(2, pp); m <= batch; ++m) {
    if (batch % m == 0) {
      runs.push_back(static_cast<int>(m));
      break;
    }
  }
  return runs;
}

std::string micro_batch_prefix(const std::string& prefix, int micro_batches,
                               nn::ScheduleKind schedule) {
  if (micro_batches == 1) return prefix + " (1 micro-batch): ";
  return fmt::format("{} ({} micro-batches, {}): ", prefix, micro_batches, nn::to_string(schedule));
}

std::vector<nn::MlpWeights> make_stack_weights(const ValidateContext& ctx, std::int64_t layers,
                                               std::uint64_t fc1_seed, std::uint64_t fc2_seed) {
  std::vector<nn::MlpWeights> stack;
  for (std::int64_t i = 0; i < layers; ++i) {
    const auto index = static_cast<std::uint64_t>(i);
    stack.push_back(nn::make_mlp_weights(ctx.sizes.hidden, ctx.sizes.intermediate,
                                         ctx.seed + fc1_seed + index, ctx.seed + fc2_seed + index,
                                         autograd::DType::f32, ctx.device));
  }
  return stack;
}

autograd::Tensor make_activation(const ValidateContext& ctx, std::uint64_t seed_offset,
                                 double std) {
  return autograd::randn({ctx.sizes.batch, ctx.sizes.seq, ctx.sizes.hidden}, ctx.seed + seed_offset,
                         std, autograd::DType::f32, ctx.device);
}

void expect_mlp_gradients(Comparison& comparison, const nn::Parameters& local,
                          const nn::Parameters& dense, int tp_rank, int tp, double scale) {
  // Shard dim of fc1.weight, fc1.bias, fc2.weight, fc2.bias (-1: replicated).
  constexpr int kShardDim[] = {0, 0, 1, -1};
  autograd::NoGradGuard no_grad;
  for (std::size_t i = 0; i < local.size(); ++i) {
    autograd::Tensor expected = dense[i].tensor.grad();
    if (expected.defined()) {
      expected = autograd::scale(expected, scale);
      const int dim = kShardDim[i % 4];
      if (dim >= 0) {
        const std::int64_t width = expected.size(dim) / tp;
        expected = autograd::narrow(expected, dim, tp_rank * width, width);
      }
    }
    comparison.expect_close(local[i].tensor.grad(), expected);
  }
}

std::string trivial_at(const char* axis, int degree) {
  return degree == 1 ? fmt::format("{} 1", axis) : std::string();
}

void log_parameters(spdlog::logger& log, const std::string& what, const nn::Parameters& params) {
  std::string line = what + ":";
  for (const nn::Parameter& p : params) {
    line += fmt::format(" {} {}", p.name, autograd::to_string(p.tensor.shape()));
  }
  log.debug(line);
}

}  // namespace mpitron::app
