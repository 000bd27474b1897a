#include "app/common/model_sizes.h"

#include <fmt/format.h>

#include <initializer_list>
#include <limits>
#include <utility>

#include "comm/errors.h"
#include "kernels/ops.h"

namespace mpitron::app {

void add_model_size_options(CLI::App& command, ModelSizes& sizes) {
  add_size_option(command, "--hidden", sizes.hidden, "Hidden size");
  add_size_option(command, "--intermediate", sizes.intermediate, "MLP intermediate size");
  add_size_option(command, "--batch", sizes.batch, "Batch size (per data-parallel replica)");
  add_size_option(command, "--seq", sizes.seq, "Sequence length");
  add_size_option(command, "--layers", sizes.layers, "MLP layers (split over the pipeline stages)");
  add_size_option(command, "--micro-batches", sizes.micro_batches,
                  "Pipeline micro-batches per step");
}

void check_tensor_elements(
    std::initializer_list<std::pair<const char*, std::initializer_list<std::int64_t>>> tensors) {
  for (const auto& [name, extents] : tensors) {
    std::int64_t n = 1;  // saturating instead of overflowing
    for (const std::int64_t e : extents) {
      if (__builtin_mul_overflow(n, e, &n)) n = std::numeric_limits<std::int64_t>::max();
    }
    if (n > kMaxTensorElements) {
      throw comm::ConfigError(fmt::format("{} is too large: a tensor may hold at most {} elements",
                                          name, kMaxTensorElements));
    }
  }
}

void check_divisibility(const ModelSizes& sizes, int tp, int pp) {
  const std::pair<const char*, std::int64_t> all[] = {
      {"hidden", sizes.hidden}, {"intermediate", sizes.intermediate},
      {"batch", sizes.batch},   {"seq", sizes.seq},
      {"layers", sizes.layers}, {"micro-batches", sizes.micro_batches}};
  for (const auto& [name, value] : all) {
    if (value < 1) throw comm::ConfigError(fmt::format("--{} must be >= 1, got {}", name, value));
  }
  check_tensor_elements(
      {{"--batch x --seq x --intermediate", {sizes.batch, sizes.seq, sizes.intermediate}},
       {"--batch x --seq x --hidden", {sizes.batch, sizes.seq, sizes.hidden}},
       {"--intermediate x --hidden", {sizes.intermediate, sizes.hidden}}});
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

nlohmann::json config_json(const ModelSizes& sizes, const ParallelSizes& parallel,
                           kernels::Device device, std::uint64_t seed, int world_size) {
  return {{"world_size", world_size},
          {"tp", parallel.tp},
          {"pp", parallel.pp},
          {"dp", parallel.dp},
          {"cp", parallel.cp},
          {"device", kernels::to_string(device)},
          {"threads", kernels::cpu_threads()},
          {"gemm", kernels::to_string(kernels::gemm_provider())},
          {"hidden", sizes.hidden},
          {"intermediate", sizes.intermediate},
          {"batch", sizes.batch},
          {"seq", sizes.seq},
          {"layers", sizes.layers},
          {"micro_batches", sizes.micro_batches},
          {"seed", seed},
          {"version", MPITRON_VERSION}};
}

}  // namespace mpitron::app
