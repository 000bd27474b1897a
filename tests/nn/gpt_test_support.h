// Helpers of the GPT tests: the topologies a world size can take, tensors compared by their
// normalised error, golden parameters as a MasterInit, and a parameter's slice of a full tensor.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "comm/topology.h"
#include "nn/models/gpt_config.h"
#include "nn_test_support.h"
#include "support/golden_file.h"

namespace mpitron::test {

using autograd::Tensor;

/// Every (tp, pp, dp) with tp*pp*dp == world, for tp, pp, dp in {1, 2, 4}.
inline std::vector<std::array<int, 3>> topologies_of(int world) {
  std::vector<std::array<int, 3>> all;
  for (int tp : {1, 2, 4})
    for (int pp : {1, 2, 4})
      for (int dp : {1, 2, 4})
        if (tp * pp * dp == world) all.push_back({tp, pp, dp});
  return all;
}

/// max |a - b| / max |b| (max |a - b| when b is all zero): the error of a whole tensor relative
/// to its scale, so a tensor of tiny values cannot pass by an absolute tolerance.
inline double max_rel_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return scale > 0.0 ? diff / scale : diff;
}

/// This rank's slice of `full` for a parameter laid out like `p` over a TP group of `tp` ranks.
inline Tensor slice_of(const Tensor& full, const nn::Parameter& p, int tp_rank, int tp) {
  return nn::tp_slice(full, p.split_dim, tp_rank, tp);
}

/// Parameters read from "param.<name>" entries of a golden file.
inline nn::MasterInit golden_init(const GoldenFile& golden, autograd::DType dtype) {
  return [&golden, dtype](const nn::ParameterSpec& spec) {
    return golden.tensor("param." + spec.name, dtype);
  };
}

/// Integer ids of a golden entry as an int64 tensor.
inline Tensor golden_ids(const GoldenFile& golden, const std::string& name) {
  std::vector<std::int64_t> ids;
  for (const double v : golden.values(name))
    ids.push_back(static_cast<std::int64_t>(v));
  return Tensor::from_indices(ids, golden.shape(name));
}

}  // namespace mpitron::test
