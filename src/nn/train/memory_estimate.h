// What one rank of a GPT training run holds in memory at its peak, predicted from the sizes: the
// parameter states, the activations a pipeline schedule keeps in flight, and the start-up copy
// of the whole model. Compare with the measured peak RSS (`train` prints both).
#pragma once

#include <cstdint>

#include "nn/models/gpt_config.h"
#include "nn/parallel/schedule.h"

namespace mpitron::nn {

/// The process without the model (code, libraries, MPI's buffers): a tiny run's peak RSS, 21 MiB,
/// rounded up.
inline constexpr std::int64_t kRuntimeBytes = std::int64_t{32} << 20;

/// The sizes the estimate needs, for one rank.
struct MemoryEstimateInput {
  GptConfig config;                  ///< the model (its padded vocabulary included)
  std::int64_t rank_parameters = 0;  ///< parameters this rank holds (its TP shard of its stage)
  std::int64_t seq = 0;              ///< tokens per sequence (the whole sequence)
  std::int64_t micro_batch = 0;      ///< sequences per micro-batch
  std::int64_t micro_batches = 0;    ///< micro-batches per step per replica
  int tp = 1, pp = 1, stage = 0;     ///< stage: this rank's pipeline stage in [0, pp)
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  bool recompute = false;
  /// tensors per parameter: 2 for AdamW, 0 for train's SGD (momentum 0 keeps none)
  int optimizer_states = 2;
  std::int64_t element_bytes = 4;  ///< 4 for float32, 8 for float64
  bool from_file = false;          ///< the run starts from a --init-from file
  /// The ranks the optimizer states are split over: dp x cp under the distributed optimizer with
  /// AdamW (each bucket padded to a multiple of it), else 1.
  int state_shards = 1;
  bool sequence_parallel = false;  ///< activations split along seq over TP (GptStage)
  int virtual_stages = 1;          ///< model chunks per stage (interleaved 1F1B with >= 2)
  /// the context-parallel degree: a rank keeps activations for its seq / cp tokens
  int cp = 1;
  /// train --bf16 (kernels::GemmOperands::bfloat16): the activations only GEMMs keep are
  /// bfloat16, 2 bytes each (autograd::gemm_operand), the optimizer keeps float32 masters
  /// of its state shard (Optimizer::keep_float32_masters), and the trainer holds a bfloat16
  /// copy of each weight (autograd::Bf16WeightCopies)
  bool bf16 = false;
};

/// The estimate, in bytes.
struct MemoryEstimate {
  std::int64_t weights = 0;              ///< this rank's parameters
  std::int64_t parameter_states = 0;     ///< weights, gradients and optimizer states
  std::int64_t activations = 0;          ///< what backward needs, for the micro-batches in flight
  std::int64_t optimizer_workspace = 0;  ///< the update's temporaries of one tensor
  std::int64_t start_up = 0;  ///< at start-up: the whole model's copy and what is built beside it
  /// kRuntimeBytes plus the larger of start-up and training (parameter states, activations and
  /// the optimizer's workspace).
  std::int64_t peak() const;
};

/// Counts the tensors the autograd graph keeps per transformer block and micro-batch, in
/// elements with s = seq / cp (a context-parallel rank's zigzag shard; ring attention keeps
/// its merged output and log-sum-exp per row like the fused kernel), b = micro_batch, h = hidden, a
/// = heads, t = tp (the count of Korthikanti et al. 2022, "Reducing Activation Recomputation in
/// Large Transformer Models", section 4.1, without dropout masks and in one element size):
/// - replicated across TP, 4 sbh: LayerNorm 1's input and output, LayerNorm 2's input and output;
///   with sequence parallelism (Korthikanti et al. 2022, sec. 4.2.2) 2 sbh / t + 2 sbh: the
///   LayerNorms' inputs are this rank's seq/tp rows, their outputs are kept all-gathered by the
///   column-parallel layers that read them (Megatron-LM's re-gather in backward is not done);
/// - sharded, 8 sbh / t + the MLP's: q, k, v and their per-head copies (6 sbh / t; llama's k
///   and v after RoPE and after the copies that repeat each key/value head for its query heads,
///   so grouped-query attention keeps as much as multi-head), the attention output per head and
///   its reshape (2 sbh / t); GPT-2's MLP pre-activation and activation (2 sbf / t with f the
///   MLP's inner size 4h: 8 sbh / t), llama's gate, up and SwiGLU outputs (3 sbf / t);
/// - a s b / t: the fused attention's log-sum-exp per query row and head. Its [s, s] scores and
///   probabilities are recomputed block by block in backward, never kept (FlashAttention).
/// Of these, LayerNorm 1's and 2's outputs, the attention output's reshape (sbh / t) and
/// llama's SwiGLU output (sbf / t) are kept by GEMMs only (linear, fused_mlp), GPT-2's
/// pre-activation (sbf / t) is fc1's bfloat16 product under bf16 (fused_mlp), the LayerNorms'
/// xhat (RMSNorms' inputs) and llama's gate and up (2 sbf / t) are kept rounded under bf16
/// (keep_activation),
/// and at cp 1 the fused attention keeps q, k, v and its output (4 sbh / t) as bfloat16 under
/// bf16 (scaled_dot_product_attention): with bf16 they count 2 bytes an element, the rest (and
/// backward's workspace below, which holds gradients, plus under bf16 the bfloat16 copies of
/// llama's gate's and up's gradients, sbf / t) element_bytes.
/// A stage keeps chunks_in_flight(schedule, pp, stage, micro_batches, virtual_stages) model
/// chunks of layers / (pp virtual_stages) blocks in flight (schedule.h): the blocks of
/// min(pp - stage, micro_batches) micro-batches under 1F1B (PipeDream-Flush, Narayanan et al.
/// 2021), all of them under all-forward-all-backward, and under interleaved 1F1B about
/// 1 + 1 / virtual_stages times 1F1B's on the first stage; with recompute, each block keeps only
/// its input (sbh, or sbh / t with sequence parallelism) and one block's full set is rebuilt at
/// a time. Backward adds one block's set as workspace (the gradients beside the activations),
/// and at cp > 1 ring attention's buffers, 20 sbh / t (the key/value shards and their gradients
/// in flight and arriving, the blocks' gradients and their copies; context_parallel_attention).
/// The last stage adds, for one micro-batch, LayerNorm f's input and output (2 sbh; with
/// sequence parallelism sbh / t + sbh, the output all-gathered; the output is the head GEMM's;
/// both bfloat16 with bf16)
/// and the logits, s b Vp / t, which their gradient overwrites (vocab_parallel_cross_entropy;
/// with bf16 bfloat16, 2 bytes each, plus the float32 scratch of widened_logits_rows rows that
/// reads them). Parameter states: rank_parameters x (2 +
/// (optimizer_states + 1 with bf16's masters) / state_shards) elements (with state_shards > 1,
/// plus each flat buffer's
/// padding: under state_shards elements per bucket), with bf16 plus rank_parameters x 2 bytes
/// (the weights' bfloat16 copies of a step), and the update's temporaries of the largest
/// tensor (the embedding's shard, Vp h / t, or an MLP weight's, f h / t). Start-up: the whole
/// model's parameters beside this rank's weights, or, from a file, twice the whole model (the file
/// read and its tensors, which live until the trainer is built) beside all of this rank's parameter
/// states: an upper bound, 20-30 % above the measured peak for GPT-2 124M. And kRuntimeBytes.
/// Throws std::invalid_argument for sizes < 1, seq not divisible by cp, a stage outside [0, pp) or
/// a layout the schedule cannot run (pipeline_layout_error; layers not divisible by pp
/// virtual_stages).
MemoryEstimate estimate_gpt_memory(const MemoryEstimateInput& input);

}  // namespace mpitron::nn
