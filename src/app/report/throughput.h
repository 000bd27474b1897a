// Model FLOP utilisation (MFU) of a run: the model's FLOPs per second over what the job's
// devices could do at their peak (Chowdhery et al. 2022, PaLM, section 4.1).
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace mpitron::app {

/// Registers `--peak-gflops` on `command`: one rank's peak in GFLOP/s (the FP32 FMA peak of the
/// cores it runs on, or of its share of a GPU); 0, the default, means unknown.
void add_peak_option(CLI::App& command, double& peak_gflops);

/// achieved_gflops (the whole job's model GFLOP/s) / (world_size * peak_gflops), a fraction in
/// [0, 1] for honest figures; nothing when peak_gflops is 0.
std::optional<double> model_flops_utilisation(double achieved_gflops, double peak_gflops,
                                              int world_size);

/// "MFU 83.7%" for `mfu` = 0.837, with " (above 100 %: --peak-gflops is below what a rank
/// achieved)" appended past 1, which no honest peak gives; "" without a value.
std::string mfu_text(std::optional<double> mfu);

}  // namespace mpitron::app
