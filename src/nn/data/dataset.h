// An in-memory regression dataset (features -> targets) held identically by every rank, and the
// gathering of a batch of its rows into tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace mpitron::nn {

/// `samples` rows of `features` inputs and `targets` outputs, row-major host values:
/// inputs [samples, features], outputs [samples, targets].
struct Dataset {
  std::int64_t samples = 0;
  std::int64_t features = 0;
  std::int64_t targets = 0;
  std::vector<double> inputs;
  std::vector<double> outputs;
};

/// A learnable synthetic dataset from `seed` (identical on every rank): inputs x ~ N(0, 1)
/// (seed), a teacher matrix A [features, targets] ~ N(0, 1/features) (seed + 1) and outputs
/// y = x A + e with noise e ~ N(0, 0.1^2) (seed + 2), so the best MSE is about 0.01.
/// Throws std::invalid_argument when a size is < 1.
Dataset make_synthetic_dataset(std::int64_t samples, std::int64_t features, std::int64_t targets,
                               std::uint64_t seed);

/// A batch of rows: inputs [rows, features], outputs [rows, targets].
struct Batch {
  autograd::Tensor inputs;
  autograd::Tensor outputs;
};

/// The rows `indices` (in order; repeats allowed) as tensors of `dtype` on `device`.
/// Throws std::out_of_range for an index outside [0, samples), std::invalid_argument for an
/// empty list.
Batch gather_batch(const Dataset& data, const std::vector<std::int64_t>& indices,
                   autograd::DType dtype, autograd::Device device);

}  // namespace mpitron::nn
