// Reading the PyTorch goldens of tools/make_golden_attention_dp.py ({"<name>": {"shape": [...],
// "data": [...]}}) from tests/data/ as tensors.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "autograd/tensor.h"

namespace mpitron::nn {

/// One golden file, opened from MPITRON_TEST_DATA_DIR.
class GoldenFile {
 public:
  explicit GoldenFile(const std::string& name) {
    const std::string path = std::string(MPITRON_TEST_DATA_DIR) + "/" + name;
    std::ifstream stream(path);
    if (!stream) throw std::runtime_error("cannot open golden file " + path);
    json_ = nlohmann::json::parse(stream);
  }

  /// Entry `name` as a tensor of `dtype` on the CPU.
  autograd::Tensor tensor(const std::string& name,
                          autograd::DType dtype = autograd::DType::f64) const {
    const nlohmann::json& entry = json_.at(name);
    return autograd::Tensor::from_vector(entry.at("data").get<std::vector<double>>(),
                                         entry.at("shape").get<autograd::Shape>(), dtype);
  }

  /// The single value of a scalar entry.
  double scalar(const std::string& name) const { return tensor(name).item(); }

 private:
  nlohmann::json json_;
};

}  // namespace mpitron::nn
