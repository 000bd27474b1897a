#include "nn/parallel/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace mpitron::nn {

ScheduleKind parse_schedule(std::string_view text) {
  for (ScheduleKind kind : {ScheduleKind::afab, ScheduleKind::one_f_one_b}) {
    if (text == to_string(kind)) return kind;
  }
  throw std::invalid_argument(
      fmt::format("unknown pipeline schedule '{}' (expected afab or 1f1b)", text));
}

std::string to_string(ScheduleKind kind) {
  return kind == ScheduleKind::afab ? "afab" : "1f1b";
}

std::vector<PipelineAction> pipeline_schedule(ScheduleKind kind, int pp, int stage,
                                              int micro_batches) {
  if (pp < 1 || stage < 0 || stage >= pp || micro_batches < 1) {
    throw std::invalid_argument(fmt::format(
        "pipeline_schedule: need pp >= 1, stage in [0, pp) and micro_batches >= 1, got pp={}, "
        "stage={}, micro_batches={}",
        pp, stage, micro_batches));
  }
  const bool first = stage == 0, last = stage == pp - 1;
  const auto forward = [&](int i) {
    return PipelineAction{PipelineAction::Type::forward, i, !first, !last};
  };
  const auto backward = [&](int i) {
    return PipelineAction{PipelineAction::Type::backward, i, !last, !first};
  };
  std::vector<PipelineAction> table;
  table.reserve(2 * static_cast<std::size_t>(micro_batches));
  if (kind == ScheduleKind::afab) {
    for (int i = 0; i < micro_batches; ++i)
      table.push_back(forward(i));
    for (int i = micro_batches - 1; i >= 0; --i)
      table.push_back(backward(i));
    return table;
  }
  const int warmup = std::min(pp - stage - 1, micro_batches);
  for (int i = 0; i < warmup; ++i)
    table.push_back(forward(i));
  for (int i = 0; i < micro_batches - warmup; ++i) {
    table.push_back(forward(warmup + i));
    table.push_back(backward(i));
  }
  for (int i = micro_batches - warmup; i < micro_batches; ++i)
    table.push_back(backward(i));
  return table;
}

std::string to_string(const std::vector<PipelineAction>& table) {
  std::string text;
  for (const PipelineAction& action : table) {
    text +=
        fmt::format("{}{}{}", text.empty() ? "" : " ",
                    action.type == PipelineAction::Type::forward ? 'F' : 'B', action.micro_batch);
  }
  return text;
}

}  // namespace mpitron::nn
