// The checks of `mpitron validate`. Each runs one parallel scheme and the dense single-process
// reference it must equal, on every rank, and returns this rank's comparisons (agreement across
// ranks happens in the caller). Seeds follow the reference program (seed + 11, 12, 13, ...).
#pragma once

#include <vector>

#include "app/validate/context.h"

namespace mpitron::app {

/// "TP: inference forward matches dense reference" and "TP: training loss and gradients match
/// dense reference": a TP MLP over the TP group vs the dense MLP (output, loss, every shard's
/// gradient and the input gradient).
std::vector<LocalCheck> check_tensor_parallel(const ValidateContext& ctx);

/// "PP: inference forward matches dense reference" and "PP: loss and every stage gradient match
/// dense reference": `layers` MLPs split over the PP stages vs the dense stack.
std::vector<LocalCheck> check_pipeline_parallel(const ValidateContext& ctx);

/// "DP: averaged gradients match all-batch reference": replicas on different batches, gradients
/// averaged over DP vs the dense MLP run on every replica's batch serially and averaged.
std::vector<LocalCheck> check_data_parallel(const ValidateContext& ctx);

/// The three COMBINED checks: TP MLPs in PP stages with DP replicas vs the dense stack run on
/// every replica's batch (forward output, loss, every gradient shard).
std::vector<LocalCheck> check_combined(const ValidateContext& ctx);

}  // namespace mpitron::app
