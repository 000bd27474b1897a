#include "nn/parallel/schedule_simulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <stdexcept>
#include <tuple>

namespace mpitron::nn {

namespace {

// A message on a channel: which boundary crossing it is, and when it was sent.
struct Message {
  int upstream_chunk, micro_batch;
  double sent;
};

// (sender, receiver, direction: 0 activation, 1 gradient).
using Channel = std::tuple<int, int, int>;

int channel_direction(const PipelineAction& action) {
  return action.type == PipelineAction::Type::forward ? 0 : 1;
}

std::string describe(const PipelineAction& action) {
  return to_string(std::vector<PipelineAction>{action}) + fmt::format(" (chunk {})", action.chunk);
}

}  // namespace

ScheduleTimeline simulate_schedule(const std::vector<std::vector<PipelineAction>>& tables,
                                   int virtual_stages, double forward_time, double backward_time) {
  if (tables.empty() || virtual_stages < 1 || !(forward_time > 0) || !(backward_time > 0)) {
    throw std::invalid_argument(fmt::format(
        "simulate_schedule: need stages, virtual_stages >= 1 and positive times, got {} stages, "
        "virtual_stages={}, forward_time={}, backward_time={}",
        tables.size(), virtual_stages, forward_time, backward_time));
  }
  const int pp = static_cast<int>(tables.size());
  std::map<Channel, std::deque<Message>> channels;
  std::vector<std::size_t> next(tables.size(), 0);
  std::vector<double> clock(tables.size(), 0.0);
  ScheduleTimeline timeline;
  timeline.busy.assign(tables.size(), 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < pp; ++s) {
      const auto stage = static_cast<std::size_t>(s);
      if (next[stage] == tables[stage].size()) continue;
      const PipelineAction& action = tables[stage][next[stage]];
      double start = clock[stage];
      if (action.recv) {
        const PipelineTransfer from = transfer_of(action, /*receive=*/true, pp, s);
        std::deque<Message>& in = channels[Channel{from.peer, s, channel_direction(action)}];
        if (in.empty()) continue;  // blocked
        if (in.front().upstream_chunk != from.upstream_chunk ||
            in.front().micro_batch != action.micro_batch) {
          throw std::logic_error(fmt::format(
              "stage {} at {} expected micro-batch {} of upstream chunk {} but got micro-batch "
              "{} of upstream chunk {}",
              s, describe(action), action.micro_batch, from.upstream_chunk, in.front().micro_batch,
              in.front().upstream_chunk));
        }
        start = std::max(start, in.front().sent);
        in.pop_front();
      }
      const double duration =
          (action.type == PipelineAction::Type::forward ? forward_time : backward_time) /
          virtual_stages;
      clock[stage] = start + duration;
      timeline.busy[stage] += duration;
      if (action.send) {
        const PipelineTransfer to = transfer_of(action, /*receive=*/false, pp, s);
        channels[Channel{s, to.peer, channel_direction(action)}].push_back(
            {to.upstream_chunk, action.micro_batch, clock[stage]});
      }
      ++next[stage];
      progress = true;
    }
  }
  for (std::size_t s = 0; s < tables.size(); ++s) {
    if (next[s] != tables[s].size()) {
      throw std::logic_error(fmt::format("deadlock: stage {} waits at action {} ({}) of {}", s,
                                         next[s], describe(tables[s][next[s]]),
                                         to_string(tables[s])));
    }
  }
  for (const auto& [channel, messages] : channels) {
    if (!messages.empty()) {
      throw std::logic_error(fmt::format("{} undelivered message(s) from stage {} to stage {}",
                                         messages.size(), std::get<0>(channel),
                                         std::get<1>(channel)));
    }
  }
  timeline.makespan = *std::max_element(clock.begin(), clock.end());
  for (const double busy : timeline.busy)
    timeline.idle.push_back(1.0 - busy / timeline.makespan);
  const double ideal = *std::max_element(timeline.busy.begin(), timeline.busy.end());
  timeline.bubble = timeline.makespan / ideal - 1.0;
  return timeline;
}

ScheduleTimeline simulate_schedule(ScheduleKind kind, int pp, int micro_batches, int virtual_stages,
                                   double forward_time, double backward_time) {
  std::vector<std::vector<PipelineAction>> tables;
  for (int stage = 0; stage < pp; ++stage)
    tables.push_back(pipeline_schedule(kind, pp, stage, micro_batches, virtual_stages));
  return simulate_schedule(tables, virtual_stages, forward_time, backward_time);
}

}  // namespace mpitron::nn
