// `mpitron bench schedule`: the pipeline bubble of AFAB, 1F1B and interleaved 1F1B for one
// (pp, virtual stages, micro-batches), from the schedule tables run on a model clock
// (nn::simulate_schedule). Pure computation: it starts no MPI, like --help.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace mpitron::app {

struct BenchScheduleOptions {
  int pp = 4;
  int virtual_stages = 2;
  int micro_batches = 8;
  double backward_ratio = 2.0;  ///< a backward's time over a forward's
};

/// Adds the `schedule` subcommand and its flags (--pp --virtual-stages --micro-batches
/// --backward-ratio) to `bench`.
CLI::App& add_bench_schedule_command(CLI::App& bench, BenchScheduleOptions& options);

/// The most forward and backward actions (2 pp V m over all stages) bench schedule simulates:
/// at this limit a run peaks at 75 MiB and takes 0.3 s (measured at pp 4, V 2).
inline constexpr std::int64_t kMaxScheduleActions = std::int64_t{1} << 22;

/// Why the options describe no layout all three schedules run (nn::pipeline_layout_error for
/// --virtual-stages of at least 2, a --backward-ratio not finite and positive, or more than
/// kMaxScheduleActions actions), or empty; every message starts "bench schedule: ".
std::string bench_schedule_error(const BenchScheduleOptions& options);

/// The report, one line per schedule: time units of one step (a stage's forward of a micro-batch
/// takes 1, its backward --backward-ratio), the bubble (time beyond the ideal over the ideal)
/// beside the paper's (pp - 1) / m or (pp - 1) / (v m), and each stage's idle share. Throws
/// std::invalid_argument with bench_schedule_error's message.
std::string bench_schedule_report(const BenchScheduleOptions& options);

}  // namespace mpitron::app
