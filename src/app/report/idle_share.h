// How much of a step each pipeline stage spends waiting: the time in the comm layer's wait
// routine (comm::wait_seconds: pipeline receives and sends, and the TP and DP collectives) over
// the step's time, per rank, and averaged over the ranks of each stage. `train` and `bench`
// report it; the pipeline bubble shows in it.
#pragma once

#include <string>
#include <vector>

namespace mpitron::app {

/// The mean of `by_rank` over the ranks of each pipeline stage, in stage order: world rank
/// r = d pp tp + p tp + t belongs to stage p (comm::ParallelTopology's numbering). Throws
/// std::invalid_argument when tp or pp is < 1 or by_rank.size() is not a multiple of tp pp.
std::vector<double> mean_by_stage(const std::vector<double>& by_rank, int tp, int pp);

/// "12 %, 3 %" for the fractions {0.12, 0.03}, rounded to whole percents.
std::string percentages(const std::vector<double>& fractions);

}  // namespace mpitron::app
