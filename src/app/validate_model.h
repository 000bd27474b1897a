// What the `validate` checks share: the run context, the dense MLP-stack reference and
// shard-aware gradient comparison.
#pragma once

#include <spdlog/logger.h>

#include <cstdint>
#include <string>
#include <vector>

#include "app/checks.h"
#include "app/model_sizes.h"
#include "comm/topology.h"
#include "nn/mlp.h"
#include "nn/schedule.h"

namespace mpitron::app {

/// Everything a check needs.
struct ValidateContext {
  const comm::ParallelTopology& topology;
  ModelSizes sizes;
  kernels::Device device;
  std::uint64_t seed;
  Tolerance tolerance;
  spdlog::logger& log;
  nn::ScheduleKind schedule = nn::ScheduleKind::afab;  ///< of the pipelined checks
};

/// A named, not yet agreed, check result of this rank.
struct LocalCheck {
  std::string name;
  Comparison comparison;
  /// Why this check cannot fail at this topology (e.g. "dp 1"), or empty; see CheckResult.
  std::string trivial;
};

/// "<axis> 1" when `degree` is 1 (a check of that axis is then trivially equal), else "".
std::string trivial_at(const char* axis, int degree);

/// The micro-batch counts the pipelined checks run with by default: 1, and the smallest divisor
/// of `batch` that is >= max(2, pp) (none when batch < max(2, pp)), so that more than one
/// micro-batch is in flight and every stage holds one at some point.
std::vector<int> default_micro_batch_runs(std::int64_t batch, int pp);

/// "PP (1 micro-batch): " for prefix "PP" and 1; "PP (4 micro-batches, 1f1b): " for 4 and
/// 1F1B (with one micro-batch every schedule is the same, so none is named).
std::string micro_batch_prefix(const std::string& prefix, int micro_batches,
                               nn::ScheduleKind schedule);

/// Master weights of `layers` MLP layers: layer i has fc1 from seed + fc1_seed + i and fc2 from
/// seed + fc2_seed + i.
std::vector<nn::MlpWeights> make_stack_weights(const ValidateContext& ctx, std::int64_t layers,
                                               std::uint64_t fc1_seed, std::uint64_t fc2_seed);

/// An activation-shaped [batch, seq, hidden] tensor ~ N(0, std^2) from seed + `seed_offset`.
autograd::Tensor make_activation(const ValidateContext& ctx, std::uint64_t seed_offset, double std);

/// Applies every MLP of `stack` in order.
template <class Layer>
autograd::Tensor forward_stack(const std::vector<Layer>& stack, autograd::Tensor x) {
  for (const Layer& layer : stack)
    x = layer.forward(x);
  return x;
}

/// Compares the gradients of one MLP layer's parameters (possibly this TP rank's shards) with
/// the dense layer's gradients times `scale`: fc1 rows, fc1 bias and fc2 columns are sliced to
/// shard `tp_rank` of `tp`; fc2's bias is replicated. Logs each name and shape.
void expect_mlp_gradients(Comparison& comparison, const nn::Parameters& local,
                          const nn::Parameters& dense, int tp_rank, int tp, double scale);

/// Logs "<what>: name [shape], ..." for a parameter list.
void log_parameters(spdlog::logger& log, const std::string& what, const nn::Parameters& params);

}  // namespace mpitron::app
