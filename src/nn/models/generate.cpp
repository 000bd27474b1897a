#include "nn/models/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "nn/layers/tp_mappings.h"
#include "nn/wording.h"

namespace mpitron::nn {

std::int64_t sample_token(const std::vector<double>& logits, const SamplingOptions& options,
                          double u) {
  if (!(options.temperature >= 0.0) || options.top_k < 0) {
    throw std::invalid_argument(fmt::format("sampling: temperature {} and top-k {} must be >= 0",
                                            options.temperature, options.top_k));
  }
  std::vector<std::size_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  // Most likely first; equal logits keep the lower id first.
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return logits[a] > logits[b]; });
  if (options.temperature == 0.0) return static_cast<std::int64_t>(order.front());
  const std::size_t k =
      options.top_k > 0 ? std::min<std::size_t>(order.size(), options.top_k) : order.size();
  std::vector<double> weights(k);
  for (std::size_t i = 0; i < k; ++i) {
    weights[i] = std::exp((logits[order[i]] - logits[order[0]]) / options.temperature);
  }
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  double cumulative = 0.0;
  for (std::size_t i = 0; i < k; ++i) {
    cumulative += weights[i] / total;
    if (u < cumulative) return static_cast<std::int64_t>(order[i]);
  }
  return static_cast<std::int64_t>(order[k - 1]);
}

std::vector<std::int64_t> generate(const GptStage& stage, const comm::Communicator& tp,
                                   std::vector<std::int64_t> ids, std::int64_t count,
                                   const SamplingOptions& options) {
  if (ids.empty() || count < 0 || !stage.is_first() || !stage.is_last()) {
    throw std::invalid_argument(
        "generate: needs a non-empty prompt, count >= 0 and the whole model on one stage (pp 1)");
  }
  autograd::NoGradGuard no_grad;
  const std::int64_t block = stage.config().block_size;
  const std::int64_t vocab =
      options.vocab > 0 ? std::min(options.vocab, stage.config().vocab) : stage.config().vocab;
  const std::vector<double> draws = autograd::uniform({std::max<std::int64_t>(1, count)},
                                                      options.seed, 0.0, 1.0, autograd::DType::f64)
                                        .to_vector();
  for (std::size_t step = 0; step < static_cast<std::size_t>(count); ++step) {
    const auto length = std::min<std::int64_t>(block, static_cast<std::int64_t>(ids.size()));
    const std::vector<std::int64_t> context(ids.end() - length, ids.end());
    const Tensor tokens = Tensor::from_indices(context, {1, length}, stage.device());
    const Tensor hidden = autograd::narrow(stage.forward(tokens), 1, length - 1, 1);
    std::vector<double> logits = gather_from_tp(stage.logits(hidden), tp).to_vector();
    logits.resize(static_cast<std::size_t>(vocab));  // drop the padding
    const auto bad =
        std::find_if(logits.begin(), logits.end(), [](double x) { return !std::isfinite(x); });
    if (bad != logits.end()) {
      throw NonFiniteLogits(
          fmt::format("the logits of generated token {} hold {}", step + 1, value_text(*bad)));
    }
    ids.push_back(sample_token(logits, options, draws[step]));
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), ids.back()) !=
        options.stop_ids.end()) {
      break;
    }
  }
  return ids;
}

}  // namespace mpitron::nn
