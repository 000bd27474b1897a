// Stopping a training run on purpose, at a step boundary, with a checkpoint: on SIGTERM, SIGINT
// or SIGUSR1 (what Slurm sends before a time limit or a preemption, with `sbatch --signal`; what
// Ctrl-C sends), on the signals --exit-signal names, or after --exit-duration-in-mins
// (Megatron-LM's --exit-signal-handler and --exit-duration-in-mins).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace mpitron::app {

/// Exit code of a run that stopped early on a signal or --exit-duration-in-mins, after saving
/// (EX_TEMPFAIL of sysexits.h: "try again"), so a job script can requeue exactly these runs.
inline constexpr int kStoppedExitCode = 75;

/// The signal number of a name: "SIGTERM", "TERM" or "15" (SIGHUP, SIGINT, SIGQUIT, SIGUSR1,
/// SIGUSR2, SIGTERM, SIGXCPU), or nothing.
std::optional<int> signal_number(const std::string& name);

/// SIGTERM, SIGINT, SIGUSR1 and the signals of `exit_signal` (comma-separated names, see
/// signal_number). Throws comm::ConfigError "--exit-signal 'X' is not one of: SIGHUP, ..." for a
/// name it does not know.
std::vector<int> stop_signals(const std::string& exit_signal);

/// Watches for a reason to stop. Installs handlers for `signals` that only record the first
/// signal; a second signal restores the default action and raises it again, so it ends the
/// process at once. The handlers are restored when the watcher is destroyed.
class StopWatch {
 public:
  /// `duration_minutes` <= 0: no time limit. Throws std::invalid_argument for a signal that
  /// cannot be caught.
  StopWatch(const std::vector<int>& signals, double duration_minutes);
  StopWatch(const StopWatch&) = delete;
  StopWatch& operator=(const StopWatch&) = delete;
  ~StopWatch();

  /// Why to stop, agreed over `world` (a signal may reach only some ranks; collective, one
  /// small all-reduce): "SIGTERM" (the lowest signal number any rank caught), "--exit-duration-
  /// in-mins 30" when world rank 0's clock passed the limit, or empty to go on.
  std::string agreed_reason(const comm::Communicator& world) const;

 private:
  std::vector<int> signals_;
  std::chrono::steady_clock::time_point start_;
  double duration_minutes_;
};

}  // namespace mpitron::app
