#include "nn/parameter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "comm/agreement.h"
#include "comm/errors.h"
#include "kernels/ops.h"

namespace mpitron::nn {

void append_parameters(Parameters& into, const std::string& prefix, const Parameters& more) {
  for (Parameter p : more) {
    p.name = prefix + "." + p.name;
    into.push_back(std::move(p));
  }
}

LinearWeights make_linear_weights(std::int64_t out_features, std::int64_t in_features,
                                  std::uint64_t seed, DType dtype, Device device) {
  if (out_features < 1 || in_features < 1) {
    throw std::invalid_argument(
        fmt::format("linear weights: sizes {} x {} must be >= 1", out_features, in_features));
  }
  const double std = 1.0 / std::sqrt(static_cast<double>(in_features));
  return {autograd::randn({out_features, in_features}, seed, std, dtype, device),
          autograd::randn({out_features}, seed + 10000, 0.1, dtype, device)};
}

Tensor shard(const Tensor& master, int dim, int index, int parts, const std::string& what) {
  const std::int64_t extent = master.size(dim);
  if (parts < 1 || extent % parts != 0) {
    throw std::invalid_argument(
        fmt::format("{}: {} is not divisible by tp {}", what, extent, parts));
  }
  autograd::NoGradGuard no_grad;
  const std::int64_t width = extent / parts;
  return autograd::narrow(master, dim, index * width, width).detach().set_requires_grad();
}

Tensor tp_slice(const Tensor& full, int split_dim, int index, int parts) {
  if (split_dim == kReplicated) return full;
  const std::int64_t width = full.size(split_dim) / parts;
  autograd::NoGradGuard no_grad;
  return autograd::narrow(full, split_dim, index * width, width);
}

Tensor replicate(const Tensor& master) {
  return master.clone().set_requires_grad();
}

void round_parameters_to_bf16(const Parameters& parameters) {
  for (const Parameter& p : parameters) {
    if (p.tensor.dtype() != DType::f32) {
      throw std::invalid_argument(
          fmt::format("bfloat16 rounding of parameter {}: it is {}, not float32", p.name,
                      kernels::to_string(p.tensor.dtype())));
    }
  }
  for (const Parameter& p : parameters) {
    Tensor values = p.tensor;  // a handle: the same storage
    if (values.numel() > 0) kernels::round_to_bf16(values.buffer(), values.buffer());
  }
}

bool all_finite(const Tensor& tensor) {
  if (tensor.device() != Device::cpu) return all_finite(tensor.to(Device::cpu));
  const kernels::Buffer& values = tensor.buffer();
  const auto finite = [&](const auto* v) {
    return std::all_of(v, v + values.numel(), [](auto x) { return std::isfinite(x); });
  };
  if (values.dtype() == DType::f32) return finite(values.data_as<float>());
  if (values.dtype() == DType::f64) return finite(values.data_as<double>());
  const std::vector<double> widened = tensor.to_vector();
  return finite(widened.data());
}

void refuse_infinite_bf16_parameters(const Parameters& parameters,
                                     const comm::Communicator& world) {
  const auto bad = std::find_if(parameters.begin(), parameters.end(),
                                [](const Parameter& p) { return !all_finite(p.tensor); });
  // Ranks, not a count: a replicated parameter, or one each replica holds, is on several ranks.
  const std::vector<int> ranks = comm::ranks_where(world, bad != parameters.end());
  if (ranks.empty()) return;
  throw comm::ConfigError(fmt::format(
      "--bf16: parameters on {} hold values beyond bfloat16's largest finite value (3.3895e38), "
      "which round to infinity{}; the run would compute NaN",
      comm::ranks_phrase(ranks), bad == parameters.end() ? "" : " (here: " + bad->name + ")"));
}

}  // namespace mpitron::nn
