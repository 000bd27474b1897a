#include "app/report/throughput.h"

#include <fmt/format.h>

#include "app/common/options.h"

namespace mpitron::app {

void add_peak_option(CLI::App& command, double& peak_gflops) {
  command
      .add_option("--peak-gflops", peak_gflops,
                  "One rank's peak GFLOP/s, for model FLOP utilisation (0: unknown)")
      ->check(at_least(0))
      ->capture_default_str();
}

std::optional<double> model_flops_utilisation(double achieved_gflops, double peak_gflops,
                                              int world_size) {
  if (peak_gflops <= 0.0) return std::nullopt;
  return achieved_gflops / (peak_gflops * world_size);
}

std::string mfu_text(std::optional<double> mfu) {
  if (!mfu) return "";
  return fmt::format(
      "MFU {:.1f}%{}", 100.0 * *mfu,
      *mfu > 1.0 ? " (above 100 %: --peak-gflops is below what a rank achieved)" : "");
}

}  // namespace mpitron::app
