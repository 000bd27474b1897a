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

// Throws std::invalid_argument for a layout pipeline_layout_error rejects or a stage outside
// [0, pp).
void check_layout(int pp, int stage, int micro_batches, int virtual_stages, bool forward_only) {
  if (const std::string error =
          pipeline_layout_error(pp, virtual_stages, micro_batches, forward_only);
      !error.empty()) {
    throw std::invalid_argument("pipeline_schedule: " + error);
  }
  if (stage < 0 || stage >= pp) {
    throw std::invalid_argument(
        fmt::format("pipeline_schedule: stage={} is outside [0, pp={})", stage, pp));
  }
}

// The forward of micro-batch `micro_batch` through chunk `chunk` on `stage`, with its transfers.
PipelineAction forward_action(int pp, int stage, int virtual_stages, int chunk, int micro_batch) {
  const bool first = stage == 0 && chunk == 0;
  const bool last = stage == pp - 1 && chunk == virtual_stages - 1;
  return {PipelineAction::Type::forward, micro_batch, !first, !last, chunk};
}

// The backward of `forward`'s chunk and micro-batch: its transfers go the other way.
PipelineAction backward_of(PipelineAction forward) {
  forward.type = PipelineAction::Type::backward;
  std::swap(forward.recv, forward.send);
  return forward;
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

std::string pipeline_layout_error(int pp, int virtual_stages, int micro_batches,
                                  bool forward_only) {
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
  if (!forward_only && micro_batches % pp != 0) {
    return fmt::format("{} virtual stages need micro-batches per step a multiple of pp={}, got {}",
                       virtual_stages, pp, micro_batches);
  }
  return {};
}

std::vector<PipelineAction> pipeline_schedule(ScheduleKind kind, int pp, int stage,
                                              int micro_batches, int virtual_stages) {
  check_layout(pp, stage, micro_batches, virtual_stages, /*forward_only=*/false);
  const int total = virtual_stages * micro_batches;
  // The k-th forward; the k-th backward of 1F1B runs the same micro-batch through the chunks in
  // reverse order.
  const auto forward = [&](int k) {
    const Slot slot = forward_slot(k, pp, virtual_stages);
    return forward_action(pp, stage, virtual_stages, slot.chunk, slot.micro_batch);
  };
  const auto backward = [&](int k) {
    const Slot slot = forward_slot(k, pp, virtual_stages);
    return backward_of(forward_action(pp, stage, virtual_stages, virtual_stages - 1 - slot.chunk,
                                      slot.micro_batch));
  };
  std::vector<PipelineAction> table;
  table.reserve(2 * static_cast<std::size_t>(total));
  const int warmup = warmup_forwards(kind, pp, stage, micro_batches, virtual_stages);
  for (int k = 0; k < warmup; ++k)
    table.push_back(forward(k));
  if (kind == ScheduleKind::afab) {
    for (int k = total - 1; k >= 0; --k)
      table.push_back(backward_of(forward(k)));
    return table;
  }
  for (int k = 0; k < total - warmup; ++k) {
    table.push_back(forward(warmup + k));
    table.push_back(backward(k));
  }
  for (int k = total - warmup; k < total; ++k)
    table.push_back(backward(k));
  return table;
}

int chunks_in_flight(ScheduleKind kind, int pp, int stage, int micro_batches, int virtual_stages) {
  check_layout(pp, stage, micro_batches, virtual_stages, /*forward_only=*/false);
  return std::min(warmup_forwards(kind, pp, stage, micro_batches, virtual_stages) + 1,
                  virtual_stages * micro_batches);
}

std::vector<PipelineAction> forward_schedule(int pp, int stage, int micro_batches,
                                             int virtual_stages) {
  check_layout(pp, stage, micro_batches, virtual_stages, /*forward_only=*/true);
  std::vector<PipelineAction> table;
  for (int i = 0; i < micro_batches; ++i) {
    for (int chunk = 0; chunk < virtual_stages; ++chunk)
      table.push_back(forward_action(pp, stage, virtual_stages, chunk, i));
  }
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
