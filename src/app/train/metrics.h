// The --metrics file of `mpitron train`: JSON lines that rank 0 appends, one run per file, that
// survive resumes (tools/plot_metrics.py draws one continuous curve per file).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace mpitron::app {

/// Lines: {"config": {...}} first, then {"step", "loss", "lr", "grad_norm", "ms",
/// "tokens_per_s", "gflops", "phases_ms" (rank 0's, app/train/step_phases.h)[, "mfu"]} per step and
/// {"step", "val_loss"} per evaluation. A run resumed from step k adds {"resume": {"from_step": k,
/// "config": {...}}}; the records of steps after k that an interrupted run left (it went on past
/// its last save) are dropped first, so every step appears once. Only the writer (rank 0) touches
/// the file.
class MetricsFile {
 public:
  /// An empty `path` or `writer` false: writes nothing. Otherwise a fresh run (no
  /// `resumed_from`) writes the config line into a file of its own: a file that already holds
  /// records (another run's, e.g. one killed before its first save) is moved to "<path>.<n>",
  /// the first n from 1 that names no file (moved_to), so that every file stays one run. A
  /// resumed run rewrites the file without the
  /// records of steps after *resumed_from (atomically: a crash leaves the old file or the new
  /// one) and appends the resume line, after a config line when the file is missing or empty.
  /// Throws std::runtime_error naming the path when the file cannot be read, moved or
  /// written, or when a line of it is not JSON.
  MetricsFile(std::string path, bool writer, const nlohmann::json& config,
              std::optional<std::int64_t> resumed_from);

  /// Appends `line` as one line.
  void write(const nlohmann::json& line) const;

  /// Where a fresh run moved the records the file held, or nothing.
  const std::optional<std::string>& moved_to() const { return moved_to_; }

 private:
  std::string path_;
  std::optional<std::string> moved_to_;
};

}  // namespace mpitron::app
