// Test-only fault injection, the one mechanism for it: each fault breaks one well-known rule of
// 3-D parallelism, so tests can prove that `mpitron validate` and `mpitron train-dp` notice (the
// matching check FAILs and the exit code is non-zero). Selected by the hidden `--inject-fault`
// flag; `none` in every normal run.
#pragma once

#include <string>

namespace mpitron::nn {

enum class Fault {
  none,
  /// copy-to-TP's backward returns the local input gradient without the TP all-reduce.
  copy_to_tp_no_all_reduce,
  /// the row-parallel bias is added on every TP rank before the all-reduce (tp times too much).
  row_bias_every_rank,
  /// data-parallel gradients are summed over the replicas, not averaged.
  dp_sum_not_average,
  /// a pipeline stage sends a zero gradient upstream instead of its input gradient.
  pp_gradient_not_sent,
  /// after its first epoch, the last data-parallel replica's first parameter moves by 1e-3 (the
  /// replicas are no longer identical; train-dp's replica check must stop the run).
  replica_drift,
};

/// Fault from its flag spelling ("none", "copy-to-tp-no-all-reduce", "row-bias-every-rank",
/// "dp-sum-not-average", "pp-gradient-not-sent", "replica-drift"); throws std::invalid_argument
/// otherwise.
Fault parse_fault(const std::string& name);

/// Activates `fault` for this process (until changed).
void inject_fault(Fault fault);

/// True when `fault` is the active one.
bool fault_active(Fault fault);

}  // namespace mpitron::nn
