// Pipeline schedules as data: for one stage, the ordered list of forward and backward passes of
// micro-batches with the transfers each needs. A pure function of (kind, pp, stage,
// micro-batches, virtual stages), unit-tested without MPI; one executor (pipeline.h) runs any
// table.
//
// With v virtual stages (Megatron-LM's virtual pipeline, Narayanan et al. 2021,
// arXiv:2104.04473, section 2.2) each stage holds v model chunks; chunk c of stage s is virtual
// stage c * pp + s of the pp * v that the model's layers are cut into, in order. Without
// interleaving (v = 1) a stage holds one chunk, chunk 0.
//
// Transfers are directional: a forward pass receives its input activation from the virtual stage
// before it and sends its output activation to the one after it; a backward pass receives the
// output gradient from the virtual stage after it and sends the input gradient to the one before
// it. The virtual stage before chunk c of stage s is chunk c of stage s - 1, or for s = 0 chunk
// c - 1 of stage pp - 1 (the pipeline wraps around). The first virtual stage never receives
// (sends) in forward (backward); the last never sends (receives) in forward (backward). Executed
// with receives waited for at the action that needs them (started earlier or not) and
// non-blocking sends, every table completes for any pp >= 1 and micro-batch count >= 1 (v = 1),
// and for pp >= 2 and micro-batches a multiple of pp (v >= 2).
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
  /// at once. With v >= 2 virtual stages: the forwards in interleaved 1F1B's order, then the
  /// backwards in exactly the reverse order.
  afab,
  /// 1F1B, PipeDream-Flush (Narayanan et al. 2021, arXiv:2104.04473, Megatron-LM's
  /// non-interleaved schedule): min(pp - stage - 1, m) warm-up forwards, then alternately one
  /// forward and one backward, then the cool-down backwards; backwards in increasing micro-batch
  /// order. At most min(pp - stage, m) micro-batches are in flight on a stage.
  /// With v >= 2 virtual stages, Megatron-LM's interleaved 1F1B (Narayanan et al. 2021, section
  /// 2.2, Figure 4 bottom): the forwards run in groups of pp micro-batches through chunk 0, then
  /// the same group through chunk 1, ..., chunk v - 1, then the next group; the backwards in the
  /// same order through the chunks from v - 1 down to 0. Warm-up: min(2 (pp - stage - 1) +
  /// (v - 1) pp, v m) forwards, then alternately one forward and one backward, then the
  /// cool-down backwards. The bubble drops from (pp - 1) / m to (pp - 1) / (v m) of a step.
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
  /// forward: receive the input activation from the virtual stage before first (stage - 1, or
  /// stage pp - 1 for stage 0); backward: receive the output gradient from the virtual stage
  /// after first (stage + 1, or stage 0 for stage pp - 1).
  bool recv;
  /// forward: send the output activation to the virtual stage after; backward: send the input
  /// gradient to the virtual stage before.
  bool send;
  int chunk = 0;  ///< the model chunk, in [0, virtual_stages)
  bool operator==(const PipelineAction&) const = default;
};

/// The most (chunk, micro-batch) pairs whose forward ran and whose backward has not on stage
/// `stage`, at any point of its pipeline_schedule table: what the stage keeps for backward, in
/// model chunks of layers / (pp virtual_stages) blocks. AFAB: virtual_stages * micro_batches;
/// 1F1B: min(pp - stage, micro_batches); interleaved 1F1B: min(2 (pp - stage - 1) +
/// (virtual_stages - 1) pp + 1, virtual_stages * micro_batches), on stage 0 about (1 + 1 /
/// virtual_stages) times the layers 1F1B keeps there (Narayanan et al. 2021, section 2.2).
/// Throws as pipeline_schedule does.
int chunks_in_flight(ScheduleKind kind, int pp, int stage, int micro_batches,
                     int virtual_stages = 1);

/// One activation or gradient crossing the boundary between two consecutive virtual stages, as
/// one end of it sees it.
struct PipelineTransfer {
  int peer;            ///< the stage at the other end, in [0, pp)
  int upstream_chunk;  ///< the chunk of the boundary's earlier virtual stage (both ends agree)
  bool operator==(const PipelineTransfer&) const = default;
};

/// The receive (`receive`) or the send of `action` on stage `stage` of `pp`: toward the virtual
/// stage before (a forward's receive, a backward's send) the peer is (stage - 1) mod pp and the
/// upstream chunk is the chunk before (chunk - 1 on stage 0); toward the one after, the peer is
/// (stage + 1) mod pp and the upstream chunk is the action's own. Does not check that the action
/// has that transfer.
PipelineTransfer transfer_of(const PipelineAction& action, bool receive, int pp, int stage);

/// Why `pp` stages with `virtual_stages` model chunks each cannot run `micro_batches`
/// micro-batches, or empty: pp < 1, micro_batches < 1, virtual_stages < 1, and with
/// virtual_stages >= 2 also pp < 2 ("interleaving needs at least 2 pipeline stages") or, unless
/// `forward_only` (forward_schedule), micro_batches not a multiple of pp (Megatron-LM's condition:
/// the forwards go through each chunk in groups of pp micro-batches).
std::string pipeline_layout_error(int pp, int virtual_stages, int micro_batches,
                                  bool forward_only = false);

/// The schedule table of stage `stage` of a `pp`-stage pipeline with `virtual_stages` model
/// chunks per stage running `micro_batches` micro-batches per step: 2 * virtual_stages *
/// micro_batches actions, each (chunk, micro-batch) once forward and once backward (after its
/// forward). Throws std::invalid_argument with pipeline_layout_error's message, or naming the
/// stage when it is outside [0, pp).
std::vector<PipelineAction> pipeline_schedule(ScheduleKind kind, int pp, int stage,
                                              int micro_batches, int virtual_stages = 1);

/// The forwards of an evaluation (no backward) on stage `stage`: micro-batch 0 through chunk 0,
/// 1, ..., virtual_stages - 1, then micro-batch 1, ...: virtual_stages * micro_batches actions
/// with the transfer flags of pipeline_schedule. Any micro_batches >= 1. Throws
/// std::invalid_argument with pipeline_layout_error's message (forward_only), or naming the
/// stage when it is outside [0, pp).
std::vector<PipelineAction> forward_schedule(int pp, int stage, int micro_batches,
                                             int virtual_stages = 1);

/// "F0 F1 B0 F2 B1 B2" (forward/backward and micro-batch), for logs and test messages; when an
/// action runs a chunk other than 0, every action names its chunk: "F0c0 F1c0 F0c1 ...".
std::string to_string(const std::vector<PipelineAction>& table);

}  // namespace mpitron::nn
