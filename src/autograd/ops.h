// Differentiable ops on autograd Tensors. Each records a Function when grad mode is on and an
// input requires grad. Conventions follow PyTorch (torch.nn.functional), so results can be
// compared with PyTorch golden values.
//
// Errors: every op throws std::invalid_argument naming the op and both shapes when shapes do not
// fit, and when inputs differ in device or dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "autograd/tensor.h"
#include "kernels/ops.h"
#include "kernels/rope.h"

namespace mpitron::autograd {

using kernels::GeluForm;

/// The operand a GEMM multiplies for x: under kernels::GemmOperands::bfloat16 a float32 x's
/// bfloat16 copy (same shape; the bits kernels::gemm rounds x to; a leaf without grad history),
/// otherwise x itself. `linear` and `fused_mlp` multiply it and keep it for the weight gradient
/// instead of x, so under train --bf16 they keep 2 bytes per element of their input.
Tensor gemm_operand(const Tensor& x);

/// y = x W^T + b: x [..., in], weight [out, in], bias [out] or undefined; y [..., out].
/// (torch.nn.functional.linear.) The GEMMs multiply x_operand, gemm_operand(x) (computed here
/// when undefined: layers that read one x several times, as attention's q, k and v, pass one
/// copy), and backward keeps it rather than x for dW = dy^T x_operand. In backward, a leaf
/// weight that already has a gradient gets dW accumulated into it by the GEMM itself (no
/// temporary; same sum as the engine's). Throws std::invalid_argument when the shapes do not
/// fit, on a device/dtype mismatch of x, weight and bias, or when a defined x_operand's shape or
/// device differs from x's or its dtype is neither x's nor bfloat16.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Tensor& x_operand = Tensor());

/// y = x W^T as a bfloat16 tensor, for a float32 x [..., in] and weight [out, in]: both rounded
/// to bfloat16 and multiplied by kernels::gemm_bf16 into a bfloat16 y [..., out] (each element
/// the float32 sum rounded once), as a bfloat16 run's linear layer writes its output (Megatron-LM
/// --bf16). The LM head's logits under train --bf16 (nn::VocabParallelEmbedding::logits). Keeps
/// x's bfloat16 copy for backward, which takes a bfloat16 or float32 dy and returns float32
/// gradients: exactly linear's under kernels::GemmOperands::bfloat16 for that dy. Throws
/// std::invalid_argument when x or weight is not float32, on a device mismatch, or when the
/// shapes do not fit.
Tensor linear_bf16_output(const Tensor& x, const Tensor& weight);

/// The most bytes of fused_mlp's backward scratch ([chunk, mid] rows; at least one row).
inline constexpr std::size_t kFusedMlpScratchBytes = std::size_t{1} << 20;

/// The MLP block without its output bias, z = gelu(x W1^T + b1) W2^T: x [..., in], fc1_weight W1
/// [mid, in], fc1_bias b1 [mid], fc2_weight W2 [out, mid]; z [..., out]. The caller adds the fc2
/// bias (a row-parallel layer adds it after the TP all-reduce). Equal to
/// linear(gelu(linear(x, W1, b1), form), W2) up to rounding, but backward keeps only x (as
/// gemm_operand(x): bfloat16 under kernels::GemmOperands::bfloat16) and the pre-activation
/// Y = x W1^T + b1 ([..., mid]), so a layer saves one [..., mid] tensor instead of two. Backward
/// runs row chunks through one scratch of at most kFusedMlpScratchBytes: gelu(Y) is recomputed
/// there for dW2, then dG = dz W2, and dY = dG * gelu'(Y) overwrites Y's rows. Bias and GELU are
/// one pass (kernels::bias_gelu). Under kernels::GemmOperands::bfloat16 with a float32 x, Y is
/// bfloat16(x W1^T) + b1, as a bfloat16 run's fc1 writes its product (Megatron-LM --bf16): the
/// product is rounded once and kept as bfloat16 (2 bytes an element); forward and backward
/// read it row chunk by chunk through kernels::bias_gelu_bf16 and bias_gelu_backward_bf16
/// (widened, biased and passed through GELU in float32 in one pass, G written as the bfloat16
/// fc2's GEMMs multiply); dY overwrites it rounded to bfloat16 (what fc1's GEMMs multiply) and
/// b1's gradient sums the float32 dY. Leaf weights that already have gradients
/// get them accumulated by the GEMMs, as in `linear`. Throws std::invalid_argument "fused_mlp:
/// input .. does not fit fc1 weight .., fc1 bias .. and fc2 weight .." when the shapes do not fit
/// or fc1_bias is undefined, and on a device/dtype mismatch. `bf16_output`: z is written as
/// bfloat16 by fc2's GEMM, each element its float32 sum rounded once (kernels::gemm_bf16), as a
/// row-parallel fc2 whose partial sums cross TP as bfloat16 writes them (nn::RowParallelLinear);
/// its gradient dz stays float32 (what the TP mapping hands back). It needs the bfloat16 pre:
/// throws
/// std::invalid_argument "fused_mlp: a bfloat16 output needs bfloat16 GEMM operands and a
/// float32 input" otherwise.
Tensor fused_mlp(const Tensor& x, const Tensor& fc1_weight, const Tensor& fc1_bias,
                 const Tensor& fc2_weight, GeluForm form = GeluForm::exact,
                 bool bf16_output = false);

/// Batched matrix product: a [..., m, k] (or [..., k, m] when trans_a), b [..., k, n] (or
/// [..., n, k] when trans_b) with equal leading (batch) dims, or b 2-D and shared by every batch;
/// result [..., m, n].
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

/// a + b: equal shapes, or b 1-D of size a.size(-1) broadcast over a's leading dims (a bias).
Tensor add(const Tensor& a, const Tensor& b);

/// a - b, equal shapes.
Tensor sub(const Tensor& a, const Tensor& b);

/// a * b element-wise, equal shapes.
Tensor mul(const Tensor& a, const Tensor& b);

/// alpha * x.
Tensor scale(const Tensor& x, double alpha);

/// x rounded to bfloat16 and widened back: x float32 (any shape) -> float32 of the same shape,
/// each element rounded to nearest, ties to even (kernels::convert). Backward rounds the
/// gradient the same way, so this models a bfloat16 wire that carries activations forward and
/// their gradients back (train --bf16's pipeline sends, PipelineSpec::bf16_wire). Throws
/// std::invalid_argument "round_through_bf16: ..." for a dtype other than float32.
Tensor round_through_bf16(const Tensor& x);

/// x (float32) as a bfloat16 computation reads it: a new float32 tensor of x's values rounded
/// to bfloat16 (kernels::round_to_bf16's rule), whose gradient passes to x unchanged (the reader
/// computes in float32 and its gradient stays float32; the `Bf16Parameter` read of
/// tools/make_golden_gpt.py). Used where train --bf16 reads attention's q, k and v as bfloat16
/// but the op keeps float32 storage (ring attention) and by the dense references that model it.
/// Throws std::invalid_argument for a dtype other than float32.
Tensor read_as_bf16(const Tensor& x);

/// GELU, exact (erf) by default or the tanh approximation; see kernels::GeluForm.
Tensor gelu(const Tensor& x, GeluForm form = GeluForm::exact);

/// Numerically stable softmax over the last dim of scale * x (subtracts the row max):
/// softmax(x, causal, scale)[..., i, j] = softmax_j(scale * x[..., i, :]). With `causal`, x is
/// [..., seq, seq] attention scores and the entries j > i are masked (-inf before the max, so
/// probability exactly 0), as in a decoder (Vaswani et al., arXiv:1706.03762, sec. 3.2.3); no
/// mask tensor is made. Throws std::invalid_argument when x is a scalar, or when `causal` and x
/// is not [..., n, n].
Tensor softmax(const Tensor& x, bool causal = false, double scale = 1.0);

/// Fused scaled dot-product attention, softmax(scale q k^T) v over the last two dims
/// (torch.nn.functional.scaled_dot_product_attention without dropout or a mask tensor): q, k, v
/// [..., seq, head_dim] of equal shapes (at least 2-D; the leading dims are batch and heads) ->
/// [..., seq, head_dim]. `scale` defaults to 1 / sqrt(head_dim); with `causal`, query i attends
/// to keys j <= i only. The kernel (kernels::attention_forward, FlashAttention's blocked online
/// softmax) never stores the [seq, seq] scores: backward keeps q, k, v, the output and one
/// log-sum-exp per query row and recomputes the probabilities block by block. Equal to
/// matmul(softmax(matmul(q, k, false, true), causal, scale), v) up to rounding. Throws
/// std::invalid_argument "scaled_dot_product_attention: ..." when the shapes differ, q has fewer
/// than 2 dims or an empty seq or head_dim, on a device/dtype mismatch, and for bfloat16 inputs.
///
/// Under kernels::GemmOperands::bfloat16 (train --bf16) float32 q, k and v are read as
/// bfloat16 (gemm_operand: rounded to nearest even, as a bfloat16 run's q, k and v projections
/// write them; Megatron-LM --bf16) and backward keeps those bfloat16 copies and the output
/// rounded to bfloat16 (for D = rowsum(dO * O), as FlashAttention's bfloat16 output gives it),
/// 2 bytes an element, which the kernels widen exactly as they read them; the output, the
/// log-sum-exps and the gradients stay float32, and the gradients pass to q, k and v unrounded.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool causal = false,
                                    std::optional<double> scale = std::nullopt);

/// Layer normalization over the last dim (Ba, Kiros & Hinton, arXiv:1607.06450;
/// torch.nn.functional.layer_norm with normalized_shape [C]): x [..., C], weight and bias [C];
/// y = (x - mean) / sqrt(var + eps) * weight + bias with the biased variance of each row.
/// Backward keeps xhat = (x - mean) / sqrt(var + eps) (rounded to bfloat16 under
/// kernels::GemmOperands::bfloat16) and one rstd per row.
/// Throws std::invalid_argument "layer_norm: weight [..] does not match the last dim of x [..]"
/// (or bias), and on a dtype/device mismatch.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

/// Root mean square normalization over the last dim (Zhang & Sennrich, arXiv:1910.07467; Hugging
/// Face LlamaRMSNorm, torch.nn.functional.rms_norm with normalized_shape [C]): x [..., C],
/// weight [C]; y = x / sqrt(mean(x^2) + eps) * weight, the mean over each row's C elements (in
/// double), no mean subtracted, no bias. eps is the family's (Llama 2 and 3: 1e-5). Backward
/// keeps x and one reciprocal root mean square per row. Throws std::invalid_argument
/// "rms_norm: weight [..] does not match the last dim of x [..]", on a dtype/device mismatch and
/// when eps < 0.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);

/// Rotary position embedding (RoPE; Su et al., arXiv:2104.09864) as Hugging Face Llama applies
/// it to q and k: x [batch, seq, heads, head_dim] (the layout of q and k before the attention
/// core moves the heads forward), each head's element i paired with i + head_dim / 2
/// (rotate_half) and rotated by the angle (position_offset + s) rope.inverse_frequency(i,
/// head_dim) for the token at sequence index s; see kernels::rotary_embedding and
/// kernels/rope.h. rope.theta: Llama 2 10000, Llama 3 500000 (Llama 3.1 and 3.2 add scaling).
/// position_offset: the position of x's first token (0 in training, the cache length while
/// generating). The backward rotates the gradient back (by minus each angle). Throws
/// std::invalid_argument "rotary_embedding: x [..] is not [batch, seq, heads, head_dim] with
/// seq, heads >= 1 and an even head_dim >= 2", and (from the kernel) when `rope` breaks
/// kernels::rope_error's rules or position_offset < 0.
Tensor rotary_embedding(const Tensor& x, const kernels::RopeFrequencies& rope,
                        std::int64_t position_offset = 0);

/// SwiGLU's gated activation (Shazeer, arXiv:2002.05202; Hugging Face LlamaMLP's
/// act_fn(gate_proj(x)) * up_proj(x)): silu(gate) * up element-wise, silu(g) = g sigmoid(g);
/// gate and up of equal shapes. Backward keeps gate and up. Throws std::invalid_argument when
/// the shapes differ, and on a dtype/device mismatch.
Tensor swiglu(const Tensor& gate, const Tensor& up);

/// Embedding lookup (torch.nn.functional.embedding): weight [V, C] float, indices int32/int64 of
/// any shape [...] on weight's device -> [..., C], row indices[...] of weight. The gradient
/// reaches weight only (repeated indices accumulate). Throws std::invalid_argument naming the
/// first position (row-major) whose index is outside [0, V) and its value, when indices is not
/// an integer tensor, or weight not 2-D.
Tensor embedding(const Tensor& weight, const Tensor& indices);

/// Embedding lookup in a slice of a larger table: weight [rows, C] holds rows [first_row,
/// first_row + rows) of it; an index outside that range gives a zero row and no gradient (no
/// error: the caller checks the full vocabulary range). Summed over the slices of all ranks this
/// is `embedding` of the whole table (Megatron-LM's VocabParallelEmbedding, arXiv:1909.08053).
/// Throws std::invalid_argument as `embedding` for non-integer indices or a non-2-D weight.
Tensor embedding_slice(const Tensor& weight, const Tensor& indices, std::int64_t first_row);

/// Cross-entropy of logits [..., V] (float) against integer class targets [...] (int32 or int64,
/// leading dims equal to logits'): the sum over the positions whose target is not
/// kernels::kIgnoreTarget of logsumexp(logits) - logits[target], divided by `divisor`, as a
/// scalar (shape {}). `divisor` 0 means the count of targets that are not ignored, which is
/// torch.nn.functional.cross_entropy(reduction="mean", ignore_index=-1); a context-parallel shard
/// passes the global token count instead, so the shards' losses sum to the sequence's mean. An
/// ignored position adds nothing and gets a zero gradient row; when every target is ignored and
/// divisor is 0, the loss and the gradient are 0 (never NaN). Stable for logits of any magnitude
/// (subtracts the row max). The gradient, (softmax - onehot) dloss / divisor, reaches logits
/// only; it is written over the logits' storage when the loss holds the only handle on them
/// (storage_is_exclusive), so a head's logits and their gradient are never held at once. Throws
/// std::invalid_argument naming the first position whose target is neither in [0, V) nor
/// kIgnoreTarget and its value, when divisor is negative or not finite, when the shapes do not fit,
/// or when targets is not an integer tensor.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, double divisor = 0.0);

/// The divisor cross_entropy (and nn::vocab_parallel_cross_entropy) divides by: `divisor` when
/// it is > 0, else the count of `targets` that are not kernels::kIgnoreTarget (0 when all are:
/// the loss and the gradient are then 0). Reads targets on the host. Throws
/// std::invalid_argument "<op>: target X at position i of targets [shape] is outside [0, vocab)"
/// for the first (row-major) target that is neither in [0, vocab) nor kIgnoreTarget,
/// "<op>: divisor must be a finite number >= 0 ..." when divisor is negative or not finite, and
/// "<op>: targets must be int32 or int64, got D" for another dtype.
double cross_entropy_divisor(const char* op, const Tensor& targets, std::int64_t vocab,
                             double divisor);

/// Mean squared error, mean over all elements: pred and target have equal shapes; result is a
/// scalar (shape {}). torch.nn.functional.mse_loss(reduction="mean"). `target` gets no gradient.
Tensor mse_loss(const Tensor& pred, const Tensor& target);

/// Sum of all elements, a scalar (shape {}).
Tensor sum(const Tensor& x);

/// Mean of all elements, a scalar (shape {}).
Tensor mean(const Tensor& x);

/// Same elements, new shape (numel must match; one extent may be -1 and is inferred). Shares
/// storage with x.
Tensor reshape(const Tensor& x, const Shape& shape);

/// Swaps dims d0 and d1 (negative counts from the end) into a new contiguous tensor; d0 == d1
/// gives x's elements unchanged (sharing storage, like reshape).
Tensor transpose(const Tensor& x, int d0, int d1);

/// The slice [start, start + length) of dim `dim`, as a new contiguous tensor. Throws
/// std::out_of_range when the slice leaves the dim.
Tensor narrow(const Tensor& x, int dim, std::int64_t start, std::int64_t length);

/// `chunks` equal slices along `dim`; throws std::invalid_argument when the extent is not
/// divisible by `chunks`.
std::vector<Tensor> split(const Tensor& x, int chunks, int dim);

/// Concatenation along `dim`; all other dims must agree.
Tensor concat(const std::vector<Tensor>& parts, int dim);

}  // namespace mpitron::autograd
