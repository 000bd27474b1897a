// Test-only fault injection: each fault plants one plausible bug (a broken rule of 3-D
// parallelism, a wrong kernel derivative, a communication slip), so tests can prove that
// `mpitron validate` notices (the matching check FAILs and the exit code is non-zero). Selected
// by the hidden `--inject-fault` flag; `none` in every normal run. It lives in the lowest layer
// so that a kernel, the backward engine, comm and nn can each hold a one-line hook
// (`if (fault_active(Fault::x))`) at the faulty place.
#pragma once

#include <string>

namespace mpitron::kernels {

enum class Fault {
  none,
  /// copy-to-TP's backward returns the local input gradient without the TP all-reduce.
  copy_to_tp_no_all_reduce,
  /// the row-parallel bias is added on every TP rank before the all-reduce (tp times too much).
  row_bias_every_rank,
  /// data-parallel gradients are summed over the replicas, not averaged.
  dp_sum_not_average,
  /// a pipeline stage sends a zero gradient upstream instead of its input gradient.
  pp_gradient_not_sent,
  /// with virtual stages, model chunk c of stage s holds the blocks of virtual stage s v + c
  /// instead of c pp + s (an interleaved chunk mapped to the wrong stage; invisible at v = 1).
  pp_chunk_wrong_stage,
  /// copy-to-TP's backward returns 1.05 times the all-reduced gradient (every entry stays below
  /// the default atol at the default sizes; only the scale-aware test sees it).
  tp_input_grad_off_5_percent,
  /// each micro-batch's loss is weighted 1 instead of 1/micro-batches (invisible at 1 micro-batch).
  micro_batch_loss_weight_1,
  /// all_gather places rank r's block at position size - 1 - r.
  all_gather_rank_order_reversed,
  /// a transfer cut into several messages loses its last, partial message (invisible while
  /// every transfer fits one message).
  chunk_tail_dropped,
  /// the CPU GELU derivative lacks its x phi(x) term (exact form).
  gelu_grad_no_x_phi,
  /// gelu_grad_no_x_phi on the float64 path only (invisible to float32 checks).
  gelu_f64_grad_no_x_phi,
  /// the ring all-reduce's reduce-scatter phase stores each received chunk instead of adding it
  /// (invisible while every buffer takes recursive doubling or Rabenseifner's algorithm).
  ring_all_reduce_overwrites,
  /// the ring all-gather stores each received block one block too far back, over another rank's
  /// (invisible while every all-gather takes recursive doubling).
  ring_all_gather_wrong_block,
  /// the CPU softmax backward omits the row dot product: dx = y dy.
  softmax_backward_no_row_dot,
  /// attention scores are scaled by 1/head_dim instead of 1/sqrt(head_dim).
  attention_scale_head_dim,
  /// the backward engine overwrites a non-leaf tensor's pending gradient instead of adding to it.
  non_leaf_grad_overwritten,
  /// the tied token embedding's gradients are not summed over the embedding group (pp > 1).
  embedding_group_not_reduced,
  /// the global gradient norm counts replicated parameters once per TP rank.
  norm_counts_replicas_per_rank,
  /// vocab-parallel cross-entropy skips the row-max all-reduce: each TP rank shifts its
  /// exponentials by its own slice's max, so the summed sum-exp mixes different shifts.
  vocab_ce_local_max,
  /// after its first epoch, the last data-parallel replica's first parameter moves by 1e-3 (the
  /// replicas are no longer identical; train-dp's replica check must stop the run).
  replica_drift,
  /// the CPU LayerNorm backward drops the mean term of dx: dx = rstd (g - xhat mean(g xhat)).
  layer_norm_dx_no_mean,
  /// the CPU causal softmax lets query position i see key i + 1 (the mask starts one late).
  causal_mask_one_late,
  /// the CPU fused attention's online softmax does not rescale a query row's running sum and
  /// output when a later key block raises its running max (invisible while every row's keys fit
  /// one block, or the max comes in the first).
  flash_attention_no_rescale,
  /// under the distributed optimizer each replica updates the next replica's shard of every
  /// bucket: a shard offset one block off, so the gradients it applies were never averaged.
  distributed_optimizer_wrong_shard,
  /// under the distributed optimizer the parameters are not all-gathered after the update: each
  /// replica keeps its stale copy of the other replicas' shards.
  distributed_optimizer_no_all_gather,
  /// with sequence parallelism, the LayerNorm weights' and biases' gradients are not summed over
  /// TP (each TP rank keeps the contribution of its own seq/tp rows).
  sequence_parallel_layer_norm_grad_not_summed,
  /// the CPU RMSNorm adds eps after the root: rstd = 1 / (sqrt(mean x^2) + eps) (invisible
  /// unless a row's mean square is near eps or below).
  rms_norm_eps_outside_root,
  /// the CPU rotary embedding rotates adjacent pairs (2i, 2i + 1), the RoFormer paper's layout,
  /// instead of Hugging Face Llama's rotate_half pairs (i, i + head_dim / 2).
  rotary_adjacent_pairs,
  /// the CPU SwiGLU backward takes silu's derivative as sigmoid(gate), dropping its
  /// gate sigmoid (1 - sigmoid) term.
  swiglu_grad_no_silu_term,
  /// the CPU float32 -> bfloat16 loops (cpu::round_to_bf16, round_to_bf16_values and add_bf16,
  /// whose sums the bfloat16 reductions take) truncate instead of rounding to nearest even:
  /// every value whose dropped half is above the midpoint comes out one bfloat16 ulp short (the
  /// VDPBF16PS GEMM's bfloat16 C, rounded in registers, is not such a loop).
  bf16_round_truncates,
  /// the CPU bfloat16 GEMM ignores beta: C += A B into a float32 main gradient overwrites C
  /// with A B instead of accumulating.
  bf16_gemm_overwrites,
  /// under bfloat16 GEMM operands (set_gemm_operands), a GEMM that accumulates into a float32 C
  /// (beta != 0: the weight gradients' main-gradient accumulation) rounds C to bfloat16
  /// afterwards, as if the gradients were accumulated in bfloat16.
  bf16_main_grad_in_bf16,
  /// context parallelism's zigzag shards take their two chunks in the wrong order (rank c keeps
  /// chunk 2cp-1-c first): positions, targets and the attention's causal blocks no longer agree.
  cp_zigzag_chunks_swapped,
  /// the CPU attention merge adds a block's output to the running one without the log-sum-exp
  /// correction (invisible while a query row sees a single block of keys).
  ring_attention_no_lse_correction,
  /// ring attention's backward keeps the key/value gradients where they were computed instead
  /// of returning them to the rank that owns the keys and values.
  ring_attention_dkv_not_returned,
  /// under context parallelism each cp rank divides its shard's token losses by its own count of
  /// targets (a mean per shard) instead of by the whole sequence's count / cp: wrong whenever
  /// the shards count different numbers of targets, and 0 for a shard with none.
  cp_loss_local_mean,
  /// not a wrong number: a GPT checkpoint save pauses 2 s after writing its shards and before
  /// completing the step, so that a test's signal arrives in the middle of a save.
  save_pauses_before_finish,
};

/// Fault from its flag spelling ("none", or a fault's name with dashes, e.g.
/// "dp-sum-not-average"); throws std::invalid_argument naming the text otherwise.
Fault parse_fault(const std::string& name);

/// Activates `fault` for this process (until changed).
void inject_fault(Fault fault);

/// True when `fault` is the active one.
bool fault_active(Fault fault);

}  // namespace mpitron::kernels
