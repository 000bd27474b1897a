#include "app/validate/context.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "comm/agreement.h"

namespace mpitron::app {

nn::MasterInit MasterDraws::random_init(std::uint64_t seed, autograd::DType dtype,
                                        kernels::Device device) {
  const nn::MasterInit draw = nn::random_init(seed, dtype, device);
  return [this, seed, dtype, device, draw](const nn::ParameterSpec& spec) {
    auto [at, fresh] = drawn_.try_emplace({seed, dtype, device, spec.name, spec.full_shape});
    if (fresh) at->second = draw(spec);
    return at->second.clone();
  };
}

const DenseGptReferences::Reference& DenseGptReferences::get(
    std::uint64_t seed, std::int64_t rows, const std::function<Reference()>& make) {
  const auto key = std::pair{seed, rows};
  if (const auto at = made_.find(key); at != made_.end()) return at->second;
  return made_.emplace(key, make()).first->second;
}

std::vector<CheckResult> agree(const comm::Communicator& world,
                               const std::vector<LocalCheck>& checks) {
  if (checks.empty()) return {};
  std::vector<double> local;
  for (const LocalCheck& check : checks) {
    local.push_back(check.comparison.passed() ? 0.0 : 1.0);
    local.push_back(check.comparison.max_abs_error());
    local.push_back(check.comparison.max_rel_error());
  }
  const std::vector<double> all = comm::all_reduce_values(world, local, comm::ReduceOp::max);
  std::vector<CheckResult> results;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    results.push_back({checks[i].name, all[3 * i] == 0.0, all[3 * i + 1], all[3 * i + 2],
                       checks[i].comparison.tolerance(), checks[i].trivial});
  }
  return results;
}

std::vector<int> default_micro_batch_runs(std::int64_t batch, int pp) {
  std::vector<int> runs{1};
  for (std::int64_t m = std::max(2, pp); m <= batch; ++m) {
    if (batch % m == 0) {
      runs.push_back(static_cast<int>(m));
      break;
    }
  }
  return runs;
}

std::string micro_batch_prefix(const std::string& prefix, int micro_batches,
                               nn::ScheduleKind schedule, int virtual_stages) {
  if (micro_batches == 1) return prefix + " (1 micro-batch): ";
  return fmt::format("{} ({} micro-batches, {}{}): ", prefix, micro_batches,
                     nn::to_string(schedule),
                     virtual_stages > 1 ? fmt::format(", {} virtual stages", virtual_stages) : "");
}

nn::MlpStackInit stack_init(const ValidateContext& ctx, std::uint64_t fc1_seed,
                            std::uint64_t fc2_seed) {
  return {ctx.sizes.hidden,    ctx.sizes.intermediate, ctx.seed + fc1_seed,
          ctx.seed + fc2_seed, autograd::DType::f32,   ctx.device};
}

autograd::Tensor make_activation(const ValidateContext& ctx, std::uint64_t seed_offset,
                                 double std) {
  return autograd::randn({ctx.sizes.batch, ctx.sizes.seq, ctx.sizes.hidden}, ctx.seed + seed_offset,
                         std, autograd::DType::f32, ctx.device);
}

void expect_gradients(Comparison& comparison, const nn::Parameters& local,
                      const nn::Parameters& dense, int tp_rank, int tp, double scale) {
  autograd::NoGradGuard no_grad;
  for (const nn::Parameter& p : local) {
    const auto same = std::find_if(dense.begin(), dense.end(),
                                   [&p](const nn::Parameter& d) { return d.name == p.name; });
    if (same == dense.end()) {
      throw std::logic_error("expect_gradients: the dense model has no parameter " + p.name);
    }
    autograd::Tensor expected = same->tensor.grad();
    if (expected.defined()) {
      expected = nn::tp_slice(autograd::scale(expected, scale), p.split_dim, tp_rank, tp);
    }
    comparison.expect_close(p.tensor.grad(), expected);
  }
}

std::string trivial_at(const char* axis, int degree) {
  return degree == 1 ? fmt::format("{} 1", axis) : std::string();
}

void log_parameters(spdlog::logger& log, const std::string& what, const nn::Parameters& params) {
  std::string line = what + ":";
  for (const nn::Parameter& p : params) {
    line += fmt::format(" {} {}", p.name, autograd::to_string(p.tensor.shape()));
  }
  log.debug(line);
}

}  // namespace mpitron::app
