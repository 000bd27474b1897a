// Reading the committed PyTorch golden values (tools/make_golden*.py) from tests/data/.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace mpitron::test {

/// One golden file, {"<name>": {"shape": [...], "data": [...]}, ...}, opened from
/// MPITRON_TEST_DATA_DIR. Throws std::runtime_error when it cannot be opened and
/// nlohmann::json::exception for a missing entry.
class GoldenFile {
 public:
  explicit GoldenFile(const std::string& name) {
    const std::string path = std::string(MPITRON_TEST_DATA_DIR) + "/" + name;
    std::ifstream stream(path);
    if (!stream) throw std::runtime_error("cannot open golden file " + path);
    json_ = nlohmann::json::parse(stream);
  }

  autograd::Shape shape(const std::string& name) const {
    return json_.at(name).at("shape").get<autograd::Shape>();
  }

  /// The entry's values, row-major, as stored (float64).
  std::vector<double> values(const std::string& name) const {
    return json_.at(name).at("data").get<std::vector<double>>();
  }

  /// Entry `name` as a tensor of `dtype` on `device`.
  autograd::Tensor tensor(const std::string& name, autograd::DType dtype = autograd::DType::f64,
                          autograd::Device device = autograd::Device::cpu) const {
    return autograd::Tensor::from_vector(values(name), shape(name), dtype, device);
  }

  /// The single value of a scalar entry.
  double scalar(const std::string& name) const { return tensor(name).item(); }

 private:
  nlohmann::json json_;
};

}  // namespace mpitron::test
