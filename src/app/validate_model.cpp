#include "app/validate_model.h"

#include <fmt/format.h>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "comm/errors.h"

namespace mpitron::app {

void check_divisibility(const ModelSizes& sizes, int tp, int pp) {
  const std::pair<const char*, std::int64_t> all[] = {
      {"hidden", sizes.hidden}, {"intermediate", sizes.intermediate}, {"batch", sizes.batch},
      {"seq", sizes.seq},       {"layers", sizes.layers},             {"micro-batches", sizes.micro_batches}};
  for (const auto& [name, value] : all) {
    if (value < 1) throw comm::ConfigError(fmt::format("--{} must be >= 1, got {}", name, value));
  }
  const std::pair<const char*, std::int64_t> by_tp[] = {
      {"hidden", sizes.hidden}, {"intermediate", sizes.intermediate}, {"seq", sizes.seq}};
  for (const auto& [name, value] : by_tp) {
    if (value % tp != 0) {
      throw comm::ConfigError(fmt::format("{} {} is not divisible by tp {}", name, value, tp));
    }
  }
  if (sizes.layers % pp != 0) {
    throw comm::ConfigError(fmt::format("layers {} is not divisible by pp {}", sizes.layers, pp));
  }
  if (sizes.batch % sizes.micro_batches != 0) {
    throw comm::ConfigError(fmt::format("batch {} is not divisible by micro-batches {}",
                                        sizes.batch, sizes.micro_batches));
  }
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
  return autograd::randn({ctx.sizes.batch, ctx.sizes.seq, ctx.sizes.hidden},
                         ctx.seed + seed_offset, std, autograd::DType::f32, ctx.device);
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

void log_parameters(spdlog::logger& log, const std::string& what, const nn::Parameters& params) {
  std::string line = what + ":";
  for (const nn::Parameter& p : params) {
    line += fmt::format(" {} {}", p.name, autograd::to_string(p.tensor.shape()));
  }
  log.debug(line);
}

}  // namespace mpitron::app
