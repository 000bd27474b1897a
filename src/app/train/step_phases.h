// The step's phases as `mpitron train` reports them: per step in the --metrics file, as a mean
// in the --json report and in one line at the end of the run.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "comm/traffic.h"
#include "nn/train/gpt_trainer.h"

namespace mpitron::app {

/// {"forward_backward", "gradient_reduction", "gradient_norm", "optimizer",
/// "parameter_all_gather"} of `phases`, in milliseconds.
nlohmann::json phases_ms(const nn::StepPhases& phases);

/// The sum of the phases of the steps added, for their mean.
class PhaseTotals {
 public:
  /// `parameter_all_gather`: whether text() names that phase (the distributed optimizer's).
  explicit PhaseTotals(bool parameter_all_gather) : parameter_all_gather_(parameter_all_gather) {}

  /// Counts one step's phases.
  void add(const nn::StepPhases& phases);

  /// phases_ms of the mean over the steps added (zeros when none was).
  nlohmann::json mean_ms() const;

  /// "forward-backward 512.3 ms (80 %), gradient reduction 20.1 ms (3 %), ..." of the mean, each
  /// with its share of the sum.
  std::string text() const;

 private:
  nn::StepPhases sum_;
  int steps_ = 0;
  bool parameter_all_gather_;
};

/// The mean bytes per step this rank handed to each group's communication (comm/traffic.h),
/// summed over the steps added, in MiB: {"tp": 1.5, "dp": 3.0}, the groups in name order.
class TrafficTotals {
 public:
  /// Counts one step: the traffic between the snapshots before and after it.
  void add(const comm::Traffic& before, const comm::Traffic& after);

  /// {name: MiB per step} of the mean (empty when nothing was added or sent).
  nlohmann::json mean_mib() const;

  /// "tp 1.50 MiB, dp 3.00 MiB" of the mean, or "none" (one rank, or no group sent anything).
  std::string text() const;

 private:
  comm::Traffic sum_;
  int steps_ = 0;
};

}  // namespace mpitron::app
