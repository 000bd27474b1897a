#include "app/bench/schedule.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "app/common/help.h"
#include "app/common/options.h"
#include "nn/parallel/schedule_simulation.h"

namespace mpitron::app {

CLI::App& add_bench_schedule_command(CLI::App& bench, BenchScheduleOptions& options) {
  CLI::App& command = *bench.add_subcommand(
      "schedule",
      "Pipeline bubble of AFAB, 1F1B and interleaved 1F1B on a model clock (starts no MPI)");
  add_size_option(command, "--pp", options.pp, "Pipeline stages");
  add_size_option(command, "--virtual-stages", options.virtual_stages,
                  "Model chunks per stage of the interleaved schedule (at least 2)");
  add_size_option(command, "--micro-batches", options.micro_batches, "Micro-batches per step");
  command
      .add_option("--backward-ratio", options.backward_ratio, "A backward's time over a forward's")
      ->capture_default_str();
  add_example(command, "mpitron bench schedule --pp 4 --virtual-stages 2 --micro-batches 8");
  return command;
}

std::string bench_schedule_error(const BenchScheduleOptions& o) {
  if (o.virtual_stages < 2) {
    return fmt::format(
        "bench schedule: --virtual-stages must be >= 2 (the interleaved schedule), got {}",
        o.virtual_stages);
  }
  if (!std::isfinite(o.backward_ratio) || o.backward_ratio <= 0) {
    return fmt::format("bench schedule: --backward-ratio must be a finite positive number, got {}",
                       o.backward_ratio);
  }
  const std::string error = nn::pipeline_layout_error(o.pp, o.virtual_stages, o.micro_batches);
  if (!error.empty()) return "bench schedule: " + error;
  // The simulation holds every action of every stage: 2 pp V m of them.
  const double actions = 2.0 * o.pp * o.virtual_stages * o.micro_batches;
  if (actions > kMaxScheduleActions) {
    return fmt::format(
        "bench schedule: pp {} x {} virtual stages x {} micro-batches is {:.3g} actions, more "
        "than the {} it simulates",
        o.pp, o.virtual_stages, o.micro_batches, actions, kMaxScheduleActions);
  }
  return {};
}

namespace {

std::string line(const std::string& name, const nn::ScheduleTimeline& timeline, double paper) {
  std::string idle;
  for (const double share : timeline.idle)
    idle += fmt::format("{}{:.1f} %", idle.empty() ? "" : ", ", 100.0 * share);
  return fmt::format("{:<16} {:>10.2f} {:>7.2f} % {:>12.2f} %   {}\n", name, timeline.makespan,
                     100.0 * timeline.bubble, 100.0 * paper, idle);
}

}  // namespace

std::string bench_schedule_report(const BenchScheduleOptions& o) {
  if (const std::string error = bench_schedule_error(o); !error.empty()) {
    throw std::invalid_argument(error);
  }
  const int p = o.pp, v = o.virtual_stages, m = o.micro_batches;
  const double ratio = o.backward_ratio;
  const double plain = static_cast<double>(p - 1) / m;
  const double interleaved = plain / v;
  return fmt::format(
             "bench schedule: pp {}, {} virtual stages, {} micro-batches; a stage's forward of "
             "a micro-batch takes 1 time unit, its backward {:g}\n"
             "{:<16} {:>10} {:>9} {:>14}   {}\n",
             p, v, m, ratio, "schedule", "time units", "bubble", "(p-1)/(v m)",
             "idle share per stage") +
         line("afab", nn::simulate_schedule(nn::ScheduleKind::afab, p, m, 1, 1.0, ratio), plain) +
         line("1f1b", nn::simulate_schedule(nn::ScheduleKind::one_f_one_b, p, m, 1, 1.0, ratio),
              plain) +
         line(fmt::format("interleaved v {}", v),
              nn::simulate_schedule(nn::ScheduleKind::one_f_one_b, p, m, v, 1.0, ratio),
              interleaved);
}

}  // namespace mpitron::app
