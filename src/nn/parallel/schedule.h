// Pipeline schedules as data: for one stage, the ordered list of forward and backward passes of
// micro-batches with the transfers each needs. A pure function of (kind, pp, stage,
// micro-batches), unit-tested without MPI; one executor (pipeline.h) runs any table.
//
// Transfers are directional: a forward pass receives its input activation from stage - 1 and
// sends its output activation to stage + 1; a backward pass receives the output gradient from
// stage + 1 and sends the input gradient to stage - 1. The first stage never receives (sends) in
// forward (backward); the last stage never sends (receives) in forward (backward). Executed with
// receives waited for at the action that needs them (started earlier or not) and non-blocking
// sends, every table completes for any pp >= 1 and micro-batch count >= 1.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mpitron::nn {

/// Which schedule orders the micro-batches of one training step.
enum class ScheduleKind {
  /// GPipe (Huang et al. 2019, arXiv:1811.06965): all forwards 0..m-1, then all backwards in
  /// reverse order m-1..0 (the order of the original GPipe loop; gradients accumulate in the same
  /// order, so results are bitwise those of that loop). Every micro-batch's activations are alive
  /// at once.
  afab,
  /// 1F1B, PipeDream-Flush (Narayanan et al. 2021, arXiv:2104.04473, Megatron-LM's
  /// non-interleaved schedule): min(pp - stage - 1, m) warm-up forwards, then alternately one
  /// forward and one backward, then the cool-down backwards; backwards in increasing micro-batch
  /// order. At most min(pp - stage, m) micro-batches are in flight on a stage.
  one_f_one_b,
};

/// Parses "afab" or "1f1b"; throws std::invalid_argument naming the text otherwise.
ScheduleKind parse_schedule(std::string_view text);

/// "afab" / "1f1b".
std::string to_string(ScheduleKind kind);

/// One step of a stage's schedule table.
struct PipelineAction {
  enum class Type { forward, backward } type;
  int micro_batch;  ///< in [0, micro_batches)
  /// forward: receive the input activation from stage - 1 first; backward: receive the output
  /// gradient from stage + 1 first.
  bool recv;
  /// forward: send the output activation to stage + 1 after; backward: send the input gradient
  /// to stage - 1 after.
  bool send;
  bool operator==(const PipelineAction&) const = default;
};

/// The schedule table of stage `stage` of a `pp`-stage pipeline running `micro_batches`
/// micro-batches per step: 2 * micro_batches actions, each micro-batch once forward and once
/// backward (after its forward). Throws std::invalid_argument naming the values when pp < 1,
/// stage is outside [0, pp) or micro_batches < 1.
std::vector<PipelineAction> pipeline_schedule(ScheduleKind kind, int pp, int stage,
                                              int micro_batches);

/// "F0 F1 B0 F2 B1 B2" (forward/backward and micro-batch), for logs and test messages.
std::string to_string(const std::vector<PipelineAction>& table);

}  // namespace mpitron::nn
