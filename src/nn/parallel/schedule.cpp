#include "nn/parallel/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace mpitron::nn {

namespace {

// The chunk and the micro-batch of the k-th forward (k in [0, v m)) of every stage: groups of pp
// micro-batches through chunk 0, 1, ..., v - 1, then the next group (with v = 1: micro-batch
// k). The k-th backward runs the same micro-batch through chunk v - 1 - chunk.
struct Slot {
  int chunk, micro_batch;
};

Slot forward_slot(int k, int pp, int virtual_stages) {
  const int chunk = (k / pp) % virtual_stages;
  const int micro_batch = virtual_stages == 1 ? k : (k / (pp * virtual_stages)) * pp + k % pp;
  return {chunk, micro_batch};
}

// Forwards before the first backward on `stage`.
int warmup_forwards(ScheduleKind kind, int pp, int stage, int micro_batches, int virtual_stages) {
  const int total = virtual_stages * micro_batches;
  if (kind == ScheduleKind::afab) return total;
  if (virtual_stages == 1) return std::min(pp - stage - 1, micro_batches);
  return std::min(2 * (pp - stage - 1) + (virtual_stages - 1) * pp, total);
}

}  // namespace

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

PipelineTransfer transfer_of(const PipelineAction& action, bool receive, int pp, int stage) {
  const bool toward_before = receive == (action.type == PipelineAction::Type::forward);
  if (toward_before) return {(stage - 1 + pp) % pp, stage == 0 ? action.chunk - 1 : action.chunk};
  return {(stage + 1) % pp, action.chunk};
}

std::string pipeline_layout_error(int pp, int virtual_stages, int micro_batches) {
  if (pp < 1 || virtual_stages < 1 || micro_batches < 1) {
    return fmt::format(
        "a pipeline needs pp, virtual stages and micro-batches >= 1, got pp={}, "
        "virtual_stages={}, micro_batches={}",
        pp, virtual_stages, micro_batches);
  }
  if (virtual_stages == 1) return {};
  if (pp < 2) {
    return fmt::format("{} virtual stages need at least 2 pipeline stages, got pp={}",
                       virtual_stages, pp);
  }
  if (micro_batches % pp != 0) {
    return fmt::format("{} virtual stages need micro-batches per step a multiple of pp={}, got {}",
                       virtual_stages, pp, micro_batches);
  }
  return {};
}

std::vector<PipelineAction> pipeline_schedule(ScheduleKind kind, int pp, int stage,
                                              int micro_batches, int virtual_stages) {
  if (const std::string error = pipeline_layout_error(pp, virtual_stages, micro_batches);
      !error.empty()) {
    throw std::invalid_argument("pipeline_schedule: " + error);
  }
  if (stage < 0 || stage >= pp) {
    throw std::invalid_argument(
        fmt::format("pipeline_schedule: stage={} is outside [0, pp={})", stage, pp));
  }
  const int total = virtual_stages * micro_batches;
  const auto action = [&](PipelineAction::Type type, int k) {
    Slot slot = forward_slot(k, pp, virtual_stages);
    if (type == PipelineAction::Type::backward) slot.chunk = virtual_stages - 1 - slot.chunk;
    const bool first = stage == 0 && slot.chunk == 0;
    const bool last = stage == pp - 1 && slot.chunk == virtual_stages - 1;
    const bool forward = type == PipelineAction::Type::forward;
    return PipelineAction{type, slot.micro_batch, forward ? !first : !last,
                          forward ? !last : !first, slot.chunk};
  };
  std::vector<PipelineAction> table;
  table.reserve(2 * static_cast<std::size_t>(total));
  const int warmup = warmup_forwards(kind, pp, stage, micro_batches, virtual_stages);
  for (int k = 0; k < warmup; ++k)
    table.push_back(action(PipelineAction::Type::forward, k));
  if (kind == ScheduleKind::afab) {
    for (int k = total - 1; k >= 0; --k) {
      PipelineAction backward = action(PipelineAction::Type::forward, k);
      std::swap(backward.recv, backward.send);
      backward.type = PipelineAction::Type::backward;
      table.push_back(backward);
    }
    return table;
  }
  for (int k = 0; k < total - warmup; ++k) {
    table.push_back(action(PipelineAction::Type::forward, warmup + k));
    table.push_back(action(PipelineAction::Type::backward, k));
  }
  for (int k = total - warmup; k < total; ++k)
    table.push_back(action(PipelineAction::Type::backward, k));
  return table;
}

std::string to_string(const std::vector<PipelineAction>& table) {
  const bool chunks = std::any_of(table.begin(), table.end(),
                                  [](const PipelineAction& action) { return action.chunk != 0; });
  std::string text;
  for (const PipelineAction& action : table) {
    text +=
        fmt::format("{}{}{}", text.empty() ? "" : " ",
                    action.type == PipelineAction::Type::forward ? 'F' : 'B', action.micro_batch);
    if (chunks) text += fmt::format("c{}", action.chunk);
  }
  return text;
}

}  // namespace mpitron::nn
