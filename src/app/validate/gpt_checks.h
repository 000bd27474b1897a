// The GPT checks of `mpitron validate`: the transformer block, the vocab-parallel embedding and
// cross-entropy, and the whole GPT over TP+PP+DP, each against the dense model written with
// plain autograd ops (nn/models/gpt_reference.h).
#pragma once

#include <cstdint>
#include <vector>

#include "app/validate/context.h"

namespace mpitron::app {

/// The vocabulary of the GPT checks' models (byte ids), split over TP unpadded: a tp that does
/// not divide it is refused at start-up (run_validate).
inline constexpr std::int64_t kValidateVocab = 256;

/// "TP: transformer block forward and gradients match dense reference": one causal GPT block
/// (LayerNorms, attention with 2*tp or tp heads, MLP) over the TP group vs the dense block:
/// output, MSE loss, input gradient and every parameter shard's gradient. Then "TP+SP: ..." the
/// same with sequence parallelism (Korthikanti et al. 2022, arXiv:2205.05198, sec. 4.2.2): each
/// TP rank feeds its seq/tp rows [batch, seq/tp, hidden] and is compared on those rows, and the
/// LayerNorm and row-parallel bias gradients are summed over TP (sum_sequence_parallel_gradients)
/// before they are compared. Both trivial at tp 1.
std::vector<LocalCheck> check_transformer_block(const ValidateContext& ctx);

/// "TP: vocab-parallel embedding and cross-entropy match dense reference": the vocab-parallel
/// embedding, the tied head's logits and the vocab-parallel cross-entropy (vocab 216 in a table
/// of 256 rows whose random padding rows must take no part; tokens from every TP slice, targets
/// on slice boundaries) vs dense embedding, logits and the cross-entropy of the first 216
/// columns: embeddings, this rank's logits, the loss and the embedding shard's gradient.
std::vector<LocalCheck> check_vocab_parallel(const ValidateContext& ctx);

/// "COMBINED (M micro-batches, S): GPT loss and gradients match dense reference": a
/// --layers-block GPT over the whole topology (tied embedding on the first and last stage),
/// pipelined with ctx.sizes.micro_batches micro-batches per replica, ctx.schedule and
/// ctx.virtual_stages model chunks per stage (", V virtual stages" in the name when >= 2), vs the
/// dense GPT on the global batch: loss and every parameter shard's gradient after
/// finalize_gradients. Trivial only on one rank with one micro-batch.
std::vector<LocalCheck> check_gpt(const ValidateContext& ctx);

/// "DP: distributed optimizer (ZeRO-1) AdamW steps match dense reference": two AdamW steps
/// (clipping at 1.0, eps 1e-3) of the GPT over the whole topology with the distributed optimizer
/// (gradients reduce-scattered, each DP rank updating its shard, parameters all-gathered) vs
/// the dense GPT and a dense AdamW on the global batch: each step's loss and global gradient
/// norm, and every parameter shard after the second step. Trivial at dp 1.
std::vector<LocalCheck> check_distributed_optimizer(const ValidateContext& ctx);

/// "COMBINED+SP (M micro-batches, S): GPT loss and gradients match dense reference": check_gpt
/// with sequence parallelism (the activations between TP regions and the pipeline transfers
/// hold seq/tp rows; --seq is divisible by tp, as validate requires). Trivial at tp 1.
std::vector<LocalCheck> check_gpt_sequence_parallel(const ValidateContext& ctx);

/// "COMBINED(+SP) llama (M micro-batches, S): GPT loss and gradients match dense reference":
/// check_gpt (with sequence parallelism when tp > 1) for the llama family (nn::Arch::llama:
/// RMSNorm, RoPE, SwiGLU with ffn 3 hidden, no biases, an untied LM head; grouped-query
/// attention with half as many key/value heads as heads where tp divides them) against its
/// dense model (nn::dense_gpt_loss), at validate's tolerance.
std::vector<LocalCheck> check_gpt_llama(const ValidateContext& ctx);

/// "COMBINED(+CP) ignored targets (M micro-batches, S): GPT loss and gradients match dense
/// reference": check_gpt where every target at the positions of cp rank 0's zigzag shard (at
/// cp 1, of cp 2's rank 0: chunks 0 and 3 of 4, half the tokens) is kernels::kIgnoreTarget. So
/// one cp rank's shard has no counted target: its loss and gradients must be 0, not NaN, and the
/// loss is the token sum over the other shards' count, as the dense GPT's mean over the counted
/// targets. Every sequence ignores the same positions, so each micro-batch counts as many. Needs
/// --seq divisible by 4 at cp 1 (otherwise trivially passing, labelled so).
std::vector<LocalCheck> check_gpt_ignored_targets(const ValidateContext& ctx);

/// "COMBINED(+SP) bf16 (M micro-batches, S): GPT loss and gradients match dense bf16 reference":
/// check_gpt (at tp > 1 twice: with sequence parallelism and without, whose TP all-reduces
/// carry bfloat16 where SP's reduce-scatters do) where both the parallel GPT and the dense
/// one multiply bfloat16 operands in every linear layer (kernels::GemmOperands::bfloat16: float32
/// master weights, float32 main gradients accumulated by the GEMM). The two sides round the same
/// float32 values to bfloat16 except where a float32 summation order moves a value across a
/// rounding boundary, so the tolerance is kBf16Tolerance (gpt_checks.cpp), not --rtol/--atol.
/// The planted fault bf16-main-grad-in-bf16 (gradients accumulated in bfloat16) fails it.
std::vector<LocalCheck> check_gpt_bf16(const ValidateContext& ctx);

}  // namespace mpitron::app
