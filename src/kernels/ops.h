// Raw math on buffers: every op mpitron's autograd needs, on CPU (Eigen GEMM, hand-written loops)
// and CUDA (cuBLAS GEMM, hand-written kernels). No autograd, no MPI.
//
// Conventions for every function here:
// - All buffers of one call must be on the same device and have the same dtype; otherwise
//   std::invalid_argument names the op and the offending buffers' devices/dtypes. The dtype is
//   float32 or float64, except for fill and transpose (any dtype but bfloat16, integers
//   included), copy_rows (any dtype), for the index arguments (`indices`, `targets`: int32 or
//   int64) of the embedding and cross-entropy ops, and for convert and gemm_bf16 (bfloat16 and
//   float32); an integer or bfloat16 buffer anywhere else is std::invalid_argument naming the op
//   and dtype.
// - Sizes are element counts. A size that does not match a buffer's numel throws
//   std::invalid_argument naming the op and both sizes.
// - `out` may alias an input for the element-wise ops (not for gemm, transpose or copy_rows).
// - Work is queued on the device's stream; results are visible to later ops on the same device
//   and to `Buffer::to` / `copy` (which synchronize).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/device.h"

namespace mpitron::kernels {

/// out[i] = value (converted to the dtype with static_cast; integer buffers truncate). Any dtype.
void fill(Buffer& out, double value);

/// out[i] = alpha * s[0]; `s` has one element (a device scalar, e.g. a loss gradient).
void broadcast_scalar(const Buffer& s, double alpha, Buffer& out);

/// out = a + b, element-wise, equal numel.
void add(const Buffer& a, const Buffer& b, Buffer& out);

/// out = a - b, element-wise, equal numel.
void sub(const Buffer& a, const Buffer& b, Buffer& out);

/// out = a * b (Hadamard product), equal numel.
void mul(const Buffer& a, const Buffer& b, Buffer& out);

/// out = alpha * x.
void scale(const Buffer& x, double alpha, Buffer& out);

/// y += alpha * x (gradient accumulation).
void axpy(double alpha, const Buffer& x, Buffer& y);

/// out[r, c] = x[r, c] + bias[c]: x and out are [rows, cols] (rows = every leading dim, e.g.
/// batch*seq), bias is [cols].
void bias_add(const Buffer& x, const Buffer& bias, std::size_t cols, Buffer& out);

/// out[c] = sum_r x[r, c]: x is [rows, cols], out is [cols]. The bias gradient of bias_add.
void sum_rows(const Buffer& x, std::size_t cols, Buffer& out);

/// out[0] = sum_i x[i]; out has one element. Accumulates in double on CPU.
void sum(const Buffer& x, Buffer& out);

/// Which GELU: `exact` is x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)); `tanh` is the approximation
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Hendrycks & Gimpel, "Gaussian Error Linear
/// Units", arXiv:1606.08415; the same two forms as torch.nn.functional.gelu(approximate=...).
enum class GeluForm { exact, tanh };

/// y = gelu(x), element-wise.
void gelu_forward(const Buffer& x, Buffer& y, GeluForm form);

/// dx = dy * gelu'(x), element-wise (x is the forward input). dx may alias dy (in place: each
/// element is read before it is written).
void gelu_backward(const Buffer& x, const Buffer& dy, Buffer& dx, GeluForm form);

/// gelu_forward and gelu_backward of the same x in one pass, sharing each element's erf or tanh:
/// y = gelu(x) and dx = dy * gelu'(x), all four with x's numel; the values are those of the two
/// ops. y may alias dy and dx may alias x (each element is read before it is written), so a
/// recomputing backward can turn [dG, pre-activation] into [G, dY] in place.
void gelu_forward_backward(const Buffer& x, const Buffer& dy, Buffer& y, Buffer& dx, GeluForm form);

/// Fused bias + GELU behind a GEMM, one pass over memory: y[r, c] += bias[c] in place, and
/// g[r, c] = gelu(y[r, c]) of the new y. y and g are [rows, cols] (rows = every leading dim, e.g.
/// batch*seq), bias is [cols]. y keeps the pre-activation for gelu_backward; the values are
/// those of bias_add(y, bias, cols, y) then gelu_forward(y, g, form).
void bias_gelu(Buffer& y, const Buffer& bias, std::size_t cols, Buffer& g, GeluForm form);

/// bias_gelu on a bfloat16 pre-activation, into a bfloat16 activation, in one pass: g[r, c] =
/// bfloat16(gelu(pre[r, c] + bias[c])), pre and g bfloat16 [rows, cols], bias float32 [cols],
/// computed in float32: the bits of widening pre (convert), bias_add, gelu_forward and rounding
/// (convert). GPT-2's MLP under bfloat16 operands (autograd::fused_mlp: pre is fc1's product,
/// rounded; g is what fc2 multiplies). Throws std::invalid_argument unless pre and g are
/// bfloat16 and bias float32 on one device, bias has cols elements and g pre's numel, a
/// multiple of cols.
void bias_gelu_bf16(const Buffer& pre, const Buffer& bias, std::size_t cols, Buffer& g,
                    GeluForm form);

/// bias_gelu_bf16's backward in one pass, recomputing the activation: with y = pre[r, c] +
/// bias[c] in float32, g[r, c] = bfloat16(gelu(y)) (for fc2's weight gradient) and dg[r, c] =
/// dg[r, c] * gelu'(y), dg float32 [rows, cols] in place (dG in, dY out): the bits of
/// gelu_forward_backward on the widened, biased pre with G rounded. Throws as bias_gelu_bf16,
/// and unless dg is float32 with pre's numel.
void bias_gelu_backward_bf16(const Buffer& pre, const Buffer& bias, std::size_t cols, Buffer& dg,
                             Buffer& g, GeluForm form);

/// Numerically stable, scaled and optionally causal softmax over the last dim: x and y are
/// [rows, cols]; y[r, :] = softmax(scale * x[r, :]), i.e. y[r, c] = exp(scale x[r, c] - m) /
/// sum_c' exp(scale x[r, c'] - m) with m the row max of scale * x. Finite for inputs such as
/// [1000, 1000] or [151.29, 0, -151.29]; entries of -inf get probability 0.
/// With `causal`, x is a stack of square [cols, cols] score matrices (rows must be a multiple of
/// cols, else std::invalid_argument): row r is query position i = r % cols, and the entries
/// c > i count as -inf before the row max, so their probability is exactly 0; no mask is stored.
/// This is the attention softmax(q k^T / sqrt(d)) of Vaswani et al., arXiv:1706.03762, sec. 3.2.3
/// (decoder masking) with scale = 1 / sqrt(d).
void softmax_forward(const Buffer& x, std::size_t cols, Buffer& y, bool causal = false,
                     double scale = 1.0);

/// dx[r, c] = scale * y[r, c] * (dy[r, c] - sum_c' dy[r, c'] y[r, c']): y (the forward output,
/// with the same `scale`), dy and dx are [rows, cols]. Masked (causal) entries have y = 0, so
/// their dx is 0 and the same formula serves both forms.
void softmax_backward(const Buffer& y, const Buffer& dy, std::size_t cols, Buffer& dx,
                      double scale = 1.0);

/// Fused scaled dot-product attention, o = softmax(scale q k^T) v per slice, computed in blocks
/// of queries x keys with an online softmax (FlashAttention, Dao et al. 2022, arXiv:2205.14135,
/// Algorithm 1) so the [seq, seq] scores are never stored: q, k, v and o are [batch_heads, seq,
/// head_dim] (batch_heads = numel / (seq head_dim)); lse [batch_heads, seq] receives each query
/// row's log-sum-exp of its scaled scores, log sum_j exp(scale q_i . k_j), which
/// attention_backward needs. With `causal`, query i sees keys j <= i only (the rest count as
/// -inf; key blocks entirely above the diagonal are skipped). scale is usually 1 / sqrt(head_dim)
/// (Vaswani et al., arXiv:1706.03762, sec. 3.2.1). Deterministic: each output element is written
/// by one task, in a fixed order. q, k and v may be bfloat16 with float32 o and lse (train
/// --bf16's kept copies): then the products multiply bfloat16 operands and sum in float32, as
/// FlashAttention-2's bfloat16 kernels do (Dao 2023, arXiv:2307.08691): P V with each key
/// block's unnormalized probabilities rounded to bfloat16 (the softmax's maxima, exponentials and
/// sums stay float32), which moves o by at most 2^-9 max|v| from the float32 result. Throws
/// std::invalid_argument when seq or head_dim is 0, q's numel is not a multiple of seq head_dim, or
/// the dtypes pair otherwise.
void attention_forward(const Buffer& q, const Buffer& k, const Buffer& v, std::size_t seq,
                       std::size_t head_dim, bool causal, double scale, Buffer& o, Buffer& lse);

/// The gradients of attention_forward from dout [batch_heads, seq, head_dim], given its inputs
/// and saved o and lse (FlashAttention-2's backward, Dao 2023, arXiv:2307.08691, Algorithm 2):
/// the probabilities P = exp(scale q k^T - lse) are recomputed block by block, D = rowsum(dout *
/// o), dS = P (dout v^T - D); dv = P^T dout, dk = scale dS^T q, dq = scale dS k. No atomics: on
/// CPU one task per batch*head slice visits its tiles once and writes all three; on CUDA one pass
/// over key blocks writes dk and dv, one over query blocks writes dq. dq, dk, dv are
/// overwritten. q, k, v and o may be bfloat16 with the rest float32: then P, dS and dout are
/// rounded to bfloat16 where they enter a product (as attention_forward's P; D from the unrounded
/// dout). Sizes and errors as attention_forward.
void attention_backward(const Buffer& q, const Buffer& k, const Buffer& v, const Buffer& o,
                        const Buffer& lse, const Buffer& dout, std::size_t seq,
                        std::size_t head_dim, bool causal, double scale, Buffer& dq, Buffer& dk,
                        Buffer& dv);

/// Merges one block's attention into a running result, row by row (math::attention_merge_row,
/// the log-sum-exp combination ring attention uses; Liu et al., arXiv:2310.01889): o and block_o
/// are [rows, head_dim] outputs normalized over their own keys, lse and block_lse [rows] their
/// log-sum-exps (attention_forward's); o and lse become those of the union of both key sets. A
/// row with lse -inf takes the block's values. Throws std::invalid_argument when head_dim is 0 or
/// the sizes disagree.
void attention_merge(Buffer& o, Buffer& lse, const Buffer& block_o, const Buffer& block_lse,
                     std::size_t head_dim);

/// loss[0] = mean_i (pred[i] - target[i])^2 (torch.nn.functional.mse_loss, reduction "mean");
/// loss has one element.
void mse_forward(const Buffer& pred, const Buffer& target, Buffer& loss);

/// dpred[i] = dloss[0] * 2 (pred[i] - target[i]) / numel; dloss has one element.
void mse_backward(const Buffer& pred, const Buffer& target, const Buffer& dloss, Buffer& dpred);

/// Row-major GEMM: C[m, n] = alpha * op(A) op(B) + beta * C, where op(A) is [m, k] (A is stored
/// [m, k], or [k, m] when `trans_a`) and op(B) is [k, n] (B stored [k, n], or [n, k] when
/// `trans_b`). beta = 0 ignores C's old contents (NaN-safe). Eigen on CPU, cuBLAS on CUDA.
/// A float32 C with a bfloat16 A or B (the other float32 or bfloat16) is a bfloat16 product
/// whatever GemmOperands says: the float32 operand is rounded to bfloat16 and gemm_bf16
/// multiplies, as under GemmOperands::bfloat16 (an activation kept as bfloat16 for the weight
/// gradient, autograd::gemm_operand).
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
          const Buffer& a, const Buffer& b, double beta, Buffer& c);

/// `batch` independent row-major GEMMs as in `gemm`, the i-th reading A at element offset
/// i * stride_a, B at i * stride_b and writing C at i * stride_c. A stride of 0 reuses one matrix
/// for the whole batch. Used by attention ([batch*heads, seq, head_dim] products).
void gemm_batched(bool trans_a, bool trans_b, std::size_t batch, std::size_t m, std::size_t n,
                  std::size_t k, double alpha, const Buffer& a, std::size_t stride_a,
                  const Buffer& b, std::size_t stride_b, double beta, Buffer& c,
                  std::size_t stride_c);

/// Mixed-precision row-major GEMM: C[m, n] = alpha op(A) op(B) + beta C with bfloat16 A and B
/// (shapes and transposes as `gemm`) and C float32 or bfloat16. The products of bfloat16 values
/// are exact in float32 and are summed in float32; a float32 C receives that sum (beta = 1,
/// alpha = 1 is the weight-gradient accumulation C += A B into a float32 main gradient), a
/// bfloat16 C the float32 result alpha * sum + beta C rounded once per element (bf16.h). beta = 0
/// ignores C's old contents. On the CPU: mpitron's packed GEMM whatever the --gemm provider, on
/// the path bf16_gemm_path() names (each path gives the same bits at any thread count); on
/// CUDA: cuBLAS (cublasGemmEx, float32 compute). On the CPU the error of an element against the
/// exact alpha op(A) op(B) + beta C of the bfloat16 inputs is at most gamma_r (|alpha| sum_p
/// |a_ip b_pj| + |beta c_ij|) for a float32 C, r = k + ceil(k / 256) + 2 roundings of unit
/// u = 2^-24 (k terms in passes of 256), gamma_r = r u / (1 - r u) (Higham, "Accuracy and
/// Stability of Numerical Algorithms", 2nd ed., sec. 3.1; tests/kernels/test_bf16_gemm.cpp
/// derives it), and for a bfloat16 C that bound times (1 + 2^-8) plus 2^-8 of the exact value;
/// cuBLAS obeys it with u = 2^-23 (its tensor cores may add rounding toward zero). Throws
/// std::invalid_argument when a or b is not bfloat16, c is neither float32 nor bfloat16, the
/// devices differ, c aliases a or b, or a size does not match.
void gemm_bf16(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
               double alpha, const Buffer& a, const Buffer& b, double beta, Buffer& c);

/// What `gemm` multiplies when its buffers are all float32: `float32` operands as they are, or
/// `bfloat16`: A and B rounded to bfloat16 (convert) and multiplied by gemm_bf16 into the float32
/// C, so a float32 model's linear layers compute as a bfloat16 one's with float32 accumulation,
/// and beta = 1 accumulates a weight gradient into its float32 main gradient (Megatron-LM's
/// --bf16 with gradient accumulation fusion; PyTorch's float32 matmul precision "medium").
/// `gemm_batched` (the attention products) always multiplies float32 operands.
enum class GemmOperands { float32, bfloat16 };

/// Sets `gemm`'s operand precision for this process (every rank of a run must set the same);
/// float32 until set.
void set_gemm_operands(GemmOperands operands);

/// The current operand precision of `gemm`.
GemmOperands gemm_operands();

/// `gemm`'s operand precision for one scope: set_gemm_operands(operands) on construction, the
/// previous precision restored on destruction (tests and validate's bf16 checks).
class GemmOperandsScope {
 public:
  explicit GemmOperandsScope(GemmOperands operands) : previous_(gemm_operands()) {
    set_gemm_operands(operands);
  }
  ~GemmOperandsScope() { set_gemm_operands(previous_); }
  GemmOperandsScope(const GemmOperandsScope&) = delete;
  GemmOperandsScope& operator=(const GemmOperandsScope&) = delete;

 private:
  GemmOperands previous_;
};

/// How the CPU bfloat16 GEMM multiplies: `avx512bf16`, mpitron's micro-kernel on the VDPBF16PS
/// instruction (operands packed in pairs along k, never widened), where the CPU has AVX512-BF16;
/// else `convert_at_pack`, the float32 packed GEMM on operands widened to float32 as they are
/// packed. They differ in bits: VDPBF16PS treats bfloat16 denormal inputs and float32 denormal
/// results as zero and rounds after each pair of products (cpu/packed_gemm_bf16.h).
enum class Bf16GemmPath { convert_at_pack, avx512bf16 };

/// avx512bf16 when this CPU reports AVX512-BF16 (cpuid leaf 7 subleaf 1, EAX bit 5, with
/// AVX512F), else convert_at_pack; the environment variable MPITRON_BF16_GEMM (`auto`,
/// `avx512bf16` or `convert-at-pack`) chooses instead, so that a CPU with the instruction can run
/// and time what one without it runs. Read once per process (the app's start-up asks first).
/// Throws std::invalid_argument for another value, or for `avx512bf16` on a CPU without it.
Bf16GemmPath bf16_gemm_path();

/// "convert-at-pack fp32" or "avx512bf16".
std::string to_string(Bf16GemmPath path);

/// Swaps two dims: x viewed as [outer, d1, mid, d2, inner] is written to y as
/// [outer, d2, mid, d1, inner]. Any row-major transpose of two dims has this form (e.g.
/// [b, s, h, d] -> [b, h, s, d] is outer=b, d1=s, mid=1, d2=h, inner=d). Any dtype.
void transpose(const Buffer& x, std::size_t outer, std::size_t d1, std::size_t mid, std::size_t d2,
               std::size_t inner, Buffer& y);

/// Strided block copy: for r in [0, rows), copies `row_len` contiguous elements from
/// src[src_offset + r * src_stride] to dst[dst_offset + r * dst_stride]. Split, concat and
/// narrow along any dim are this copy. Any dtype, bfloat16 included. Throws std::out_of_range
/// past either buffer's end.
void copy_rows(const Buffer& src, std::size_t src_offset, std::size_t src_stride, Buffer& dst,
               std::size_t dst_offset, std::size_t dst_stride, std::size_t rows,
               std::size_t row_len);

/// dst = src converted between float32 and bfloat16: float32 -> bfloat16 rounds to nearest even
/// (NaN, inf, overflow and denormals as kernels/bf16.h states; the CPU and CUDA loops give the
/// same bits), bfloat16 -> float32 is exact. src and dst have equal numel and the same device.
/// Throws std::invalid_argument naming both dtypes for any other pair of dtypes (same dtypes
/// included: that is kernels::copy).
void convert(const Buffer& src, Buffer& dst);

/// dst = src rounded to bfloat16 and widened back, both float32 (convert's rounding, in one pass
/// without a bfloat16 temporary): float32 values that bfloat16 holds exactly. dst may be src.
/// Throws std::invalid_argument unless both are float32 of equal numel on one device.
void round_to_bf16(const Buffer& src, Buffer& dst);

/// Layer normalization over the last dim (Ba, Kiros & Hinton, "Layer Normalization",
/// arXiv:1607.06450; torch.nn.functional.layer_norm): x, y and xhat are [rows, cols], weight and
/// bias [cols], rstd [rows]. With mean[r] = mean_c x[r, c] and the biased variance
/// var[r] = mean_c (x[r, c] - mean[r])^2 (both accumulated in double), rstd[r] =
/// 1 / sqrt(var[r] + eps), xhat[r, c] = (x[r, c] - mean[r]) rstd[r] and
/// y[r, c] = xhat[r, c] weight[c] + bias[c]. xhat and rstd are what layer_norm_backward reads.
/// xhat may be bfloat16 beside float32 x, y, weight, bias and rstd (train --bf16's keep): each
/// element the float32 xhat rounded once (to_bf16), y computed from the float32 value, so y has
/// the float32 call's bits and xhat those of converting its float32 xhat afterwards.
/// Throws std::invalid_argument when eps < 0 or is NaN, or xhat is bfloat16 beside another dtype.
void layer_norm_forward(const Buffer& x, const Buffer& weight, const Buffer& bias, std::size_t cols,
                        double eps, Buffer& y, Buffer& xhat, Buffer& rstd);

/// Gradients of layer_norm_forward from dy [rows, cols], with the saved xhat [rows, cols] and
/// rstd [rows] and weight: with g = dy weight,
/// dx[r, c] = rstd[r] (g[r, c] - mean_c' g[r, c'] - xhat[r, c] mean_c' g[r, c'] xhat[r, c']),
/// dweight[c] = sum_r dy[r, c] xhat[r, c], dbias[c] = sum_r dy[r, c] (sums in double). dx is
/// [rows, cols]; dweight and dbias [cols] are overwritten, not accumulated. Starting from xhat,
/// not x, a rounded copy of xhat (autograd's bfloat16 keep) errs relatively per element, where
/// xhat recomputed from a rounded x would err by |x| rstd times the rounding.
void layer_norm_backward(const Buffer& xhat, const Buffer& weight, const Buffer& rstd,
                         const Buffer& dy, std::size_t cols, Buffer& dx, Buffer& dweight,
                         Buffer& dbias);

/// Embedding lookup of a slice of a table: weight is [rows, cols] and holds rows
/// [first_row, first_row + rows) of a larger table (first_row = 0 for a whole table); indices
/// (int32 or int64, on weight's device) is [n]; out is [n, cols] with
/// out[i] = weight[indices[i] - first_row] when that row is in the slice and 0 otherwise (the
/// vocab-parallel embedding of Shoeybi et al., "Megatron-LM", arXiv:1909.08053, sec. 3). Indices
/// are not range-checked here (the autograd op does that on the host).
void embedding_forward(const Buffer& weight, std::size_t cols, const Buffer& indices,
                       std::int64_t first_row, Buffer& out);

/// The scatter-add backward of embedding_forward: dweight[indices[i] - first_row] += dout[i] for
/// every i whose row is in the slice [first_row, first_row + rows); dout is [n, cols], dweight
/// [rows, cols] ACCUMULATES (zero it first for a fresh gradient). Repeated indices add up in index
/// order on either device, so CPU and CUDA give the same bits, run after run.
void embedding_backward(const Buffer& dout, const Buffer& indices, std::int64_t first_row,
                        std::size_t cols, Buffer& dweight);

/// out[r] = max_{c < used_cols} x[r, c]: x is [rows, cols], out [rows]; the columns from
/// used_cols on are padding and take no part (out[r] is the lowest finite value when used_cols
/// is 0). The first step of a stable log-sum-exp; with a vocabulary split over ranks, its max
/// all-reduce gives the global max. Throws std::invalid_argument when used_cols > cols.
void row_max(const Buffer& x, std::size_t cols, std::size_t used_cols, Buffer& out);

/// The target id of a position that takes no part in cross-entropy: it adds nothing to the loss,
/// gets a zero gradient row and is not counted in the default divisor. -1 is llm.c's masked
/// target (PyTorch's ignore_index defaults to -100 instead); a data loader marks padding or the
/// prompt of a fine-tuning example with it. Any other id outside [0, vocab) is an error in the
/// autograd and nn cross-entropy ops.
inline constexpr std::int64_t kIgnoreTarget = -1;

/// Per-row statistics of cross-entropy on a vocabulary slice: logits [rows, cols] holds columns
/// [first_col, first_col + cols) of the (padded) vocabulary, of which the first used_cols are
/// real entries and the rest padding that takes no part (llm.c's padded vocabulary: logits are
/// computed for Vp columns, the softmax uses the first V); targets (int32 or int64) [rows];
/// row_max [rows] is the max over the whole vocabulary. Writes sum_exp[r] = sum_{c < used_cols}
/// exp(logits[r, c] - row_max[r]) (accumulated in double) and target_logit[r] = logits[r,
/// targets[r] - first_col] when that column is a used one of the slice, else 0. Summing both over
/// the slices (all-reduce) gives the full-vocabulary values (Megatron-LM's
/// vocab_parallel_cross_entropy). A target of kIgnoreTarget lies in no slice: its target_logit
/// is 0 and its sum_exp is computed as any row's (finite; the loss and the gradient skip the row).
/// Targets are not range-checked here. Throws std::invalid_argument when used_cols > cols.
void cross_entropy_stats(const Buffer& logits, std::size_t cols, std::size_t used_cols,
                         const Buffer& targets, std::int64_t first_col, const Buffer& row_max,
                         Buffer& sum_exp, Buffer& target_logit);

/// loss[0] = (sum over the rows r whose targets[r] is not kIgnoreTarget of log(sum_exp[r]) +
/// row_max[r] - target_logit[r]) / divisor (accumulated in double): the cross-entropy
/// -log softmax(logits)[target] from the full-vocabulary statistics, summed and divided by the
/// caller's divisor (the count of counted rows gives torch.nn.functional.cross_entropy's
/// reduction "mean"; context parallelism passes the global token count). A divisor of 0 gives
/// loss 0 (every target ignored: an empty sum, never 0 / 0). row_max, sum_exp, target_logit and
/// targets (int32 or int64) are [rows]; loss has one element. Throws std::invalid_argument when
/// divisor is negative or not finite.
void cross_entropy_loss(const Buffer& row_max, const Buffer& sum_exp, const Buffer& target_logit,
                        const Buffer& targets, double divisor, Buffer& loss);

/// dlogits[r, c] = dloss[0] / divisor * (exp(logits[r, c] - row_max[r]) / sum_exp[r] -
/// [c + first_col == targets[r]]): the gradient of cross_entropy_loss for this slice's columns
/// (softmax minus one-hot); 0 in the padding columns c >= used_cols, in every column of a row
/// whose target is kIgnoreTarget, and everywhere when divisor is 0. Arguments as in
/// cross_entropy_stats and cross_entropy_loss; dloss has one element; dlogits is [rows, cols].
/// Throws std::invalid_argument when divisor is negative or not finite.
void cross_entropy_backward(const Buffer& logits, std::size_t cols, std::size_t used_cols,
                            const Buffer& targets, std::int64_t first_col, const Buffer& row_max,
                            const Buffer& sum_exp, const Buffer& dloss, double divisor,
                            Buffer& dlogits);

/// One AdamW step in place (Loshchilov & Hutter, "Decoupled Weight Decay Regularization",
/// arXiv:1711.05101), in exactly torch.optim.AdamW's order (PyTorch 1.13, amsgrad off, no
/// foreach), element-wise over param, grad, exp_avg, exp_avg_sq (equal numel):
///   p *= 1 - lr wd;  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
///   denom = sqrt(v) / sqrt(1 - beta2^step) + eps;  p -= (lr / (1 - beta1^step)) m / denom.
/// Scalars are computed in double and rounded once to the dtype. `step` counts from 1. Throws
/// std::invalid_argument when step < 1, lr, eps or weight_decay is negative, or a beta is
/// outside [0, 1).
void adamw_update(Buffer& param, const Buffer& grad, Buffer& exp_avg, Buffer& exp_avg_sq, double lr,
                  double beta1, double beta2, double eps, double weight_decay, std::int64_t step);

/// out[0] = sum_i x[i]^2 (accumulated in double; out has one element): the squared L2 norm, e.g.
/// of a gradient shard before a global-norm all-reduce.
void sum_squares(const Buffer& x, Buffer& out);

/// The largest CPU thread count set_cpu_threads accepts.
inline constexpr int kMaxCpuThreads = 4096;

/// Sets the number of OpenMP threads of the CPU kernels (the GEMM, the element-wise, row and
/// reduction loops); default 1, because the ranks of one machine already share its cores. The
/// environment variable MPITRON_CPU_THREADS sets the initial value. Every result is the same
/// bits for any count with the same GEMM provider: work is split by rules of the sizes alone and
/// sums are combined in a fixed order (src/kernels/cpu/parallel.h, cpu/gemm.cpp). (The provider
/// that `auto` names depends on the count when it is resolved: default_gemm_provider.) Without
/// OpenMP in the build the kernels run on one thread whatever the count. Throws
/// std::invalid_argument when `threads` is outside [1, kMaxCpuThreads].
void set_cpu_threads(int threads);

/// The current CPU thread count: set_cpu_threads's, else MPITRON_CPU_THREADS (read on the first
/// call), else 1. Throws std::invalid_argument naming the variable when it is read and is not an
/// integer in [1, kMaxCpuThreads].
int cpu_threads();

/// Whether the CPU kernels were built with OpenMP; without it they run on one thread whatever
/// cpu_threads() says.
bool cpu_openmp_available();

/// The library under the CPU GEMM: Eigen's own blocked kernels, a BLAS (OpenBLAS, which picks
/// its kernels for the CPU it runs on) when mpitron was built with one (gemm_blas_available), or
/// mpitron's own packed GEMM (cpu/packed_gemm.h: float32; float64 products go to Eigen).
enum class GemmProvider { eigen, blas, mpitron };

/// Whether this build has the BLAS provider (OpenBLAS from libopenblas-dev found at configure).
bool gemm_blas_available();

/// What OpenBLAS calls the kernel it picked for this CPU (openblas_get_corename, e.g. "Haswell",
/// "Zen", "SkylakeX"; OPENBLAS_CORETYPE overrides its pick); "" in a build without BLAS.
std::string gemm_blas_kernel();

/// The provider auto falls back to where nothing was measured: at one thread blas when available,
/// else eigen; at more, mpitron. It came from `bench gemm` and whole steps on the development
/// machines (Zen 4, Zen 3, an Intel Xeon: OpenBLAS at one thread 0.95-1.3x Eigen's GFLOP/s;
/// OpenBLAS keeps whole rows per tile at more threads, so there mpitron's GEMM took 0.83-0.85x
/// its step time), but a fixed rule fails where OpenBLAS runs another CPU's kernels (on Zen 5
/// with OPENBLAS_CORETYPE=Haswell it ran at 125 GFLOP/s beside mpitron's 240): hence the
/// measurement (kernels/cpu/gemm_auto.h, docs/performance.md).
GemmProvider fixed_gemm_provider();

/// Installs auto's provider for `threads` CPU threads, as measured (kernels/cpu/gemm_auto.h): from
/// then on default_gemm_provider() returns it while cpu_threads() == threads. The mpitron command
/// does this at start-up with world rank 0's choice on every rank. Throws std::invalid_argument
/// for blas in a build without it or a thread count outside [1, kMaxCpuThreads].
void set_auto_gemm_provider(GemmProvider provider, int threads);

/// The provider `auto` means at the current cpu_threads(): the one set_auto_gemm_provider
/// installed for that thread count, else fixed_gemm_provider() (so a library user or a unit test
/// that measured nothing gets the fixed rule, at no start-up cost). The bits are the same at
/// every thread count for each provider, not across providers: pin --gemm to keep a run's bits
/// when its thread count or machine changes.
GemmProvider default_gemm_provider();

/// Sets the CPU GEMM's provider for this process (every rank must choose the same, so that
/// replicas compute the same bits). The initial one is default_gemm_provider() at the first GEMM
/// (so at cpu_threads() then: set the thread count first), or what the environment variable
/// MPITRON_GEMM (auto, eigen, blas or mpitron) says. Throws
/// std::invalid_argument
/// for blas in a build without it.
void set_gemm_provider(GemmProvider provider);

/// The current provider.
GemmProvider gemm_provider();

/// The provider that runs `dtype`'s products: gemm_provider(), except that mpitron's own GEMM is
/// float32 only, so its float64 products run on eigen.
GemmProvider gemm_provider_for(DType dtype);

/// "eigen", "blas" or "mpitron".
std::string to_string(GemmProvider provider);

/// "auto" (default_gemm_provider()), "eigen", "blas" or "mpitron"; throws std::invalid_argument
/// naming the
/// text otherwise, or for "blas" in a build without it.
GemmProvider parse_gemm_provider(const std::string& text);

}  // namespace mpitron::kernels
