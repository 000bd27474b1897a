#include "nn/dataset.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>
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

// Parses the comma-separated numbers of `line` into `values`. Returns "" on success, else what is
// wrong with the first bad field; `numeric_fields` counts the fields that start with a number.
std::string parse_numbers(const std::string& line, std::vector<double>& values,
                          int& numeric_fields) {
  values.clear();
  numeric_fields = 0;
  std::string error;
  std::stringstream fields(line);
  std::string field;
  while (std::getline(fields, field, ',')) {
    std::size_t used = 0;
    try {
      values.push_back(std::stod(field, &used));
      ++numeric_fields;
    } catch (const std::out_of_range&) {
      ++numeric_fields;
      if (error.empty()) error = fmt::format("the field '{}' is out of range", field);
      continue;
    } catch (const std::exception&) {
      if (error.empty()) error = fmt::format("the field '{}' is not a number", field);
      continue;
    }
    if (error.empty() && field.find_first_not_of(" \t\r", used) != std::string::npos) {
      error = fmt::format("the field '{}' is not a number", field);
    }
  }
  return error;
}

}  // namespace

Dataset read_csv_dataset(const std::string& path, std::int64_t features, std::int64_t targets) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error(fmt::format("cannot open data file {}", path));
  Dataset data{0, features, targets, {}, {}};
  const auto columns = static_cast<std::size_t>(features + targets);
  std::string line;
  std::vector<double> values;
  int numeric_fields = 0;
  bool first = true;
  for (int number = 1; std::getline(file, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string error = parse_numbers(line, values, numeric_fields);
    const bool header = first && numeric_fields == 0;  // e.g. "x1,x2,y"
    first = false;
    if (header) continue;
    if (!error.empty()) throw std::runtime_error(fmt::format("{}:{}: {}", path, number, error));
    if (values.size() != columns) {
      throw std::runtime_error(
          fmt::format("{}:{}: expected {} columns ({} features + {} "
                      "targets), got {}",
                      path, number, columns, features, targets, values.size()));
    }
    const auto split = values.begin() + static_cast<std::ptrdiff_t>(features);
    data.inputs.insert(data.inputs.end(), values.begin(), split);
    data.outputs.insert(data.outputs.end(), split, values.end());
    ++data.samples;
  }
  if (data.samples == 0) throw std::runtime_error(fmt::format("{}: no samples", path));
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
