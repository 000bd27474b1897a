#include "nn/data/dataset.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "autograd/random.h"

namespace mpitron::nn {

Dataset make_synthetic_dataset(std::int64_t samples, std::int64_t features, std::int64_t targets,
                               std::uint64_t seed) {
  if (samples < 1 || features < 1 || targets < 1) {
    throw std::invalid_argument(
        fmt::format("dataset: samples, features and targets must be >= 1, got {}, {} and {}",
                    samples, features, targets));
  }
  Dataset data{samples, features, targets, {}, {}};
  data.inputs = autograd::randn({samples, features}, seed, 1.0, autograd::DType::f64).to_vector();
  const std::vector<double> teacher =
      autograd::randn({features, targets}, seed + 1, 1.0 / std::sqrt(static_cast<double>(features)),
                      autograd::DType::f64)
          .to_vector();
  data.outputs =
      autograd::randn({samples, targets}, seed + 2, 0.1, autograd::DType::f64).to_vector();
  for (std::int64_t s = 0; s < samples; ++s) {
    for (std::int64_t t = 0; t < targets; ++t) {
      double& y = data.outputs[static_cast<std::size_t>(s * targets + t)];
      for (std::int64_t f = 0; f < features; ++f) {
        y += data.inputs[static_cast<std::size_t>(s * features + f)] *
             teacher[static_cast<std::size_t>(f * targets + t)];
      }
    }
  }
  return data;
}

namespace {

autograd::Tensor gather_rows(const std::vector<double>& table, std::int64_t width,
                             const std::vector<std::int64_t>& indices, autograd::DType dtype,
                             autograd::Device device) {
  std::vector<double> rows;
  rows.reserve(indices.size() * static_cast<std::size_t>(width));
  for (std::int64_t index : indices) {
    const auto first = table.begin() + static_cast<std::ptrdiff_t>(index * width);
    rows.insert(rows.end(), first, first + static_cast<std::ptrdiff_t>(width));
  }
  return autograd::Tensor::from_vector(rows, {static_cast<std::int64_t>(indices.size()), width},
                                       dtype, device);
}

}  // namespace

Batch gather_batch(const Dataset& data, const std::vector<std::int64_t>& indices,
                   autograd::DType dtype, autograd::Device device) {
  if (indices.empty()) throw std::invalid_argument("gather_batch: no indices");
  for (std::int64_t index : indices) {
    if (index < 0 || index >= data.samples) {
      throw std::out_of_range(
          fmt::format("gather_batch: index {} outside [0, {})", index, data.samples));
    }
  }
  return {gather_rows(data.inputs, data.features, indices, dtype, device),
          gather_rows(data.outputs, data.targets, indices, dtype, device)};
}

}  // namespace mpitron::nn
