// The one progress line of a long run on rank 0: "train-dp  step 120/500 (24%)  loss 0.012345
// 8.1e+04 samples/s  elapsed 0:03  ETA 0:10". Redrawn in place when stdout ends up on a
// terminal; otherwise (logs, CI, Slurm output files) written as plain lines at every tenth of
// the run and at its end, so files stay short and readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace mpitron::app {

/// How the progress line is shown: `automatic` picks in_place or lines by stdout_is_terminal().
enum class ProgressMode { automatic, in_place, lines, off };

/// Registers `--progress auto|in-place|lines|off` on `command`, stored in `mode`; its help says
/// what `auto` does where stdout is not a terminal: `elsewhere` ("lines", or "off" for train,
/// whose step lines are its record).
void add_progress_option(CLI::App& command, std::string& mode, std::string_view elsewhere);

/// ProgressMode from its flag spelling; throws std::invalid_argument otherwise.
ProgressMode parse_progress_mode(const std::string& text);

/// True when this process's stdout reaches a terminal. Open MPI gives every rank a
/// pseudo-terminal even when mpirun's own output goes to a file or a pipe, so under Open MPI
/// (OMPI_COMM_WORLD_SIZE set) the launcher's stdout (/proc/<parent>/fd/1) decides: a terminal
/// for ranks started by mpirun on its own host, not one for ranks started through orted on
/// other hosts.
bool stdout_is_terminal();

/// The text of one progress report: `label`, "step done/total (p%)", then "loss L" when `loss`
/// is given, "R <rate_unit>" when `rate` is given (per second), "elapsed M:SS" and, once
/// something is done, "ETA M:SS" (the elapsed time per step times the steps left; H:MM:SS past
/// an hour). Fields are separated by two spaces.
std::string progress_text(const std::string& label, std::int64_t done, std::int64_t total,
                          std::optional<double> loss, std::optional<double> rate,
                          const std::string& rate_unit, double elapsed_seconds);

/// A progress line over `total` steps. Only the rank that makes it `enabled` prints (rank 0).
class ProgressLine {
 public:
  /// `mode` automatic resolves through stdout_is_terminal(). Throws std::invalid_argument when
  /// total < 1.
  ProgressLine(std::string label, std::int64_t total, std::string rate_unit, ProgressMode mode,
               bool enabled, std::FILE* out = stdout);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  /// Reports `done` steps (1 .. total). In place: redrawn at most every 0.1 s and at the last
  /// step; lines: printed when `done` crosses a tenth of `total`, and at the last step.
  void update(std::int64_t done, std::optional<double> loss, std::optional<double> rate);

  /// Clears an in-place line so other output (log lines) can be printed; the next update
  /// draws it again. Nothing to do in the other modes.
  void suspend();

 private:
  void print(const std::string& text);

  std::string label_;
  std::int64_t total_;
  std::string rate_unit_;
  ProgressMode mode_;
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_{};
  bool drawn_ = false;  // an in-place line is on screen
  std::int64_t next_tenth_ = 1;
};

}  // namespace mpitron::app
