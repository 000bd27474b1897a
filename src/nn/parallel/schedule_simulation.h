// Pipeline schedule tables run on a model clock instead of MPI: every stage's table at once, each
// action taking a fixed time, so a table's deadlocks, its transfer order and its bubble are known
// before a run. `mpitron bench schedule` prints the bubble; the schedule tests check every table.
#pragma once

#include <vector>

#include "nn/parallel/schedule.h"

namespace mpitron::nn {

/// The timeline of one step of a pipeline on the model clock.
struct ScheduleTimeline {
  double makespan = 0;       ///< from the first action's start to the last one's end
  std::vector<double> busy;  ///< per stage: the time it computed
  std::vector<double> idle;  ///< per stage: makespan - busy, as a share of makespan
  /// The pipeline bubble as Narayanan et al. 2021 (arXiv:2104.04473, section 2.2) count it: the
  /// time beyond the ideal, as a share of the ideal (the busiest stage's busy time):
  /// (pp - 1) / m for AFAB and 1F1B and (pp - 1) / (v m) for interleaved 1F1B when a backward
  /// takes a fixed multiple of a forward.
  double bubble = 0;
};

/// Runs the tables of all stages (tables[s]: stage s's, as pipeline_schedule makes them, with
/// tables.size() stages) together: an action starts when its stage finished the one before and,
/// if it receives, when its message was sent; sends never wait; a transfer takes no time. A
/// forward of one chunk takes forward_time / virtual_stages, a backward backward_time /
/// virtual_stages (a stage's whole forward and backward of one micro-batch: forward_time +
/// backward_time). Messages travel on one FIFO channel per (sender, receiver, direction), as MPI
/// delivers messages of one tag in order. Throws std::logic_error naming the stage and the action
/// when a receive finds another message at the head of its channel, when no stage can go on
/// before every table ended (a deadlock), or when messages are left undelivered; and
/// std::invalid_argument for no stages, virtual_stages < 1 or a time <= 0.
ScheduleTimeline simulate_schedule(const std::vector<std::vector<PipelineAction>>& tables,
                                   int virtual_stages, double forward_time = 1.0,
                                   double backward_time = 2.0);

/// simulate_schedule of pipeline_schedule(kind, pp, s, micro_batches, virtual_stages) for every
/// stage s. Throws as pipeline_schedule does for a layout it cannot run.
ScheduleTimeline simulate_schedule(ScheduleKind kind, int pp, int micro_batches, int virtual_stages,
                                   double forward_time = 1.0, double backward_time = 2.0);

}  // namespace mpitron::nn
