// The MLP-stack sizes shared by `validate` and `bench`, their flags and their checks.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "app/common/options.h"
#include "kernels/device.h"

namespace mpitron::app {

/// Model and batch sizes (defaults: the reference program's small model).
struct ModelSizes {
  std::int64_t hidden = 32;
  std::int64_t intermediate = 64;
  std::int64_t batch = 8;
  std::int64_t seq = 16;
  std::int64_t layers = 4;
  int micro_batches = 1;  ///< pipeline micro-batches per step (GPipe)
};

/// Registers --hidden --intermediate --batch --seq --layers --micro-batches on `command`.
void add_model_size_options(CLI::App& command, ModelSizes& sizes);

/// Most elements one tensor of the model may have (2^31: 8 GiB of float32).
inline constexpr std::int64_t kMaxTensorElements = std::int64_t{1} << 31;

/// Throws comm::ConfigError "<name> is too large: a tensor may hold at most 2147483648 elements"
/// for the first of `tensors` (a name that gives the flags, such as "--batch x --seq x --hidden",
/// and the product of its extents, saturated instead of overflowing) above kMaxTensorElements.
void check_tensor_elements(
    std::initializer_list<std::pair<const char*, std::initializer_list<std::int64_t>>> tensors);

/// Throws comm::ConfigError when any size is < 1, when a tensor would exceed kMaxTensorElements,
/// when hidden, intermediate or seq is not divisible by tp, layers by pp, or batch by
/// micro_batches (every rank detects it the same way).
void check_divisibility(const ModelSizes& sizes, int tp, int pp);

/// The run's configuration as JSON: world_size, tp, pp, dp, device, the sizes, seed and the
/// program version. Used in --json reports and, as text, in the start-up agreement.
nlohmann::json config_json(const ModelSizes& sizes, const ParallelSizes& parallel,
                           kernels::Device device, std::uint64_t seed, int world_size);

}  // namespace mpitron::app
