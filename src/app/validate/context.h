// What the `validate` checks share: the run context, the dense MLP-stack reference and
// shard-aware gradient comparison.
#pragma once

#include <spdlog/logger.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "app/common/model_sizes.h"
#include "app/validate/comparison.h"
#include "comm/topology.h"
#include "nn/layers/context_parallel_attention.h"
#include "nn/models/gpt_config.h"
#include "nn/models/gpt_reference.h"
#include "nn/models/mlp_stack.h"
#include "nn/parallel/schedule.h"

namespace mpitron::app {

/// The GPT checks' parameter draws of one run, so that a master drawn by several checks (the dense
/// and the parallel model of every GPT check start from the same random_init draws) is drawn
/// once: 11 checks at the defaults (each draw of a master costs a rank about 4 ns per element:
/// bench_random).
class MasterDraws {
 public:
  /// A MasterInit that returns a copy (its own storage, not differentiable) of what
  /// nn::random_init(seed, dtype, device) returns for the spec, drawing each (seed, dtype,
  /// device, name, shape) once per MasterDraws; it must not outlive this object.
  nn::MasterInit random_init(std::uint64_t seed, autograd::DType dtype, kernels::Device device);

 private:
  using Key =
      std::tuple<std::uint64_t, autograd::DType, kernels::Device, std::string, autograd::Shape>;
  std::map<Key, autograd::Tensor> drawn_;
};

/// The dense GPT of the COMBINED GPT checks, with its loss and parameter gradients, made once per
/// run: every one of those checks (each micro-batch count and schedule, with and without
/// sequence parallelism, interleaved) compares with the same dense model on the same batch; 10
/// checks at the defaults, about 2 ms of a rank's time each at np 4.
class DenseGptReferences {
 public:
  struct Reference {
    nn::TensorMap parameters;  ///< the dense parameters, their gradients filled
    autograd::Tensor loss;     ///< the dense loss, [] (scalar)
  };

  /// The reference of (init seed, rows), made by `make()` the first time it is asked for; it
  /// lives as long as this object.
  const Reference& get(std::uint64_t seed, std::int64_t rows,
                       const std::function<Reference()>& make);

 private:
  std::map<std::pair<std::uint64_t, std::int64_t>, Reference> made_;
};

/// Everything a check needs.
struct ValidateContext {
  const comm::ParallelTopology& topology;
  ModelSizes sizes;
  kernels::Device device;
  std::uint64_t seed;
  Tolerance tolerance;
  spdlog::logger& log;
  nn::ScheduleKind schedule = nn::ScheduleKind::afab;  ///< of the pipelined checks
  int virtual_stages = 1;  ///< model chunks per stage of the GPT check (interleaved with >= 2)
  /// how the GPT checks' context-parallel ranks exchange keys and values (topology.cp() > 1)
  nn::CpComm cp_comm = nn::CpComm::ring;
  MasterDraws* masters = nullptr;  ///< the run's draws (run_validate's), shared by every check
  DenseGptReferences* dense_gpt = nullptr;  ///< the run's dense GPTs (run_validate's)
};

/// A named, not yet agreed, check result of this rank.
struct LocalCheck {
  std::string name;
  Comparison comparison;
  /// Why this check cannot fail at this topology (e.g. "dp 1"), or empty; see CheckResult.
  std::string trivial;
};

/// Collective over `world`, one all-reduce for all of `checks` (the same checks on every rank):
/// each check's result, passed only if it passed on every rank, with the largest errors of any
/// rank (a MAX all-reduce of its failure flag and both errors) and its `trivial`.
std::vector<CheckResult> agree(const comm::Communicator& world,
                               const std::vector<LocalCheck>& checks);

/// "<axis> 1" when `degree` is 1 (a check of that axis is then trivially equal), else "".
std::string trivial_at(const char* axis, int degree);

/// The micro-batch counts the pipelined checks run with by default: 1, and the smallest divisor
/// of `batch` that is >= max(2, pp) (none when batch < max(2, pp)), so that more than one
/// micro-batch is in flight and every stage holds one at some point.
std::vector<int> default_micro_batch_runs(std::int64_t batch, int pp);

/// "PP (1 micro-batch): " for prefix "PP" and 1; "PP (4 micro-batches, 1f1b): " for 4 and
/// 1F1B (with one micro-batch every schedule is the same, so none is named); "COMBINED (4
/// micro-batches, 1f1b, 2 virtual stages): " with 2 virtual stages.
std::string micro_batch_prefix(const std::string& prefix, int micro_batches,
                               nn::ScheduleKind schedule, int virtual_stages = 1);

/// The MLP stack of a check (ctx's hidden and intermediate sizes, float32 on ctx's device):
/// layer i has fc1 from seed + fc1_seed + i and fc2 from seed + fc2_seed + i.
nn::MlpStackInit stack_init(const ValidateContext& ctx, std::uint64_t fc1_seed,
                            std::uint64_t fc2_seed);

/// An activation-shaped [batch, seq, hidden] tensor ~ N(0, std^2) from seed + `seed_offset`.
autograd::Tensor make_activation(const ValidateContext& ctx, std::uint64_t seed_offset, double std);

/// Compares the gradient of each parameter of `local` (possibly this TP rank's shard) with the
/// gradient of the parameter of the same name in `dense` times `scale`, sliced to shard
/// `tp_rank` of `tp` along the local parameter's split_dim (nn::tp_slice). Throws
/// std::logic_error when `dense` has no parameter of that name.
void expect_gradients(Comparison& comparison, const nn::Parameters& local,
                      const nn::Parameters& dense, int tp_rank, int tp, double scale);

/// Logs "<what>: name [shape], ..." for a parameter list.
void log_parameters(spdlog::logger& log, const std::string& what, const nn::Parameters& params);

}  // namespace mpitron::app
