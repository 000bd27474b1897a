// Raw math on buffers for the Llama family of decoders: RMSNorm, rotary position embedding
// (RoPE) and SwiGLU, forward and backward, on CPU and CUDA. The conventions of kernels/ops.h
// hold here too (same device and dtype for every buffer of a call, float32 or float64, sizes in
// elements, std::invalid_argument "kernels::<op>: ..." on a mismatch, work queued on the
// device's stream).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/device.h"
#include "kernels/rope.h"

namespace mpitron::kernels {

/// Root mean square layer normalization over the last dim (Zhang & Sennrich, "Root Mean Square
/// Layer Normalization", arXiv:1910.07467; Hugging Face LlamaRMSNorm): x and y are [rows, cols],
/// weight [cols], rstd [rows]. rstd[r] = 1 / sqrt(mean_c x[r, c]^2 + eps) (the sum of squares
/// accumulated in double); y[r, c] = x[r, c] rstd[r] weight[c]. No mean is subtracted and there
/// is no bias. rstd is saved for rms_norm_backward. y may alias x. Throws std::invalid_argument
/// when eps < 0 or is NaN.
void rms_norm_forward(const Buffer& x, const Buffer& weight, std::size_t cols, double eps,
                      Buffer& y, Buffer& rstd);

/// Gradients of rms_norm_forward from dy [rows, cols], with x, weight and the saved rstd: with
/// xhat = x rstd and g = dy weight,
/// dx[r, c] = rstd[r] (g[r, c] - xhat[r, c] mean_c' g[r, c'] xhat[r, c']) (the row mean in
/// double) and dweight[c] = sum_r dy[r, c] xhat[r, c] (in double). dx is [rows, cols]; dweight
/// [cols] is overwritten, not accumulated.
void rms_norm_backward(const Buffer& x, const Buffer& weight, const Buffer& rstd, const Buffer& dy,
                       std::size_t cols, Buffer& dx, Buffer& dweight);

/// Rotary position embedding (Su et al., "RoFormer", arXiv:2104.09864, sec. 3.2) as Hugging Face
/// Llama applies it to queries and keys: x and y are [batch, seq, heads, head_dim] (batch =
/// numel / (seq heads head_dim)); the token at sequence index s has position p = position_offset
/// + s, and pair i < head_dim / 2 of each head, elements (i, i + head_dim / 2) (rotate_half's
/// pairing, not the paper's adjacent pairs), is rotated by the angle p f_i, f_i =
/// rope.inverse_frequency(i, head_dim) (theta^(-2 i / head_dim), or Llama 3's scaled frequency):
/// y_i = x_i cos - x_{i+h} sin, y_{i+h} = x_{i+h} cos + x_i sin (h = head_dim / 2). The angle,
/// its cos and its sin are computed in double and rounded once to the dtype (Hugging Face
/// computes the angle in float32, off by up to p 2^-24 radians). rope.theta is the base: 10000
/// for Llama 2, 500000 for Llama 3. position_offset is the first position of this sequence (the
/// cache length during generation). y may alias x. Throws std::invalid_argument when seq, heads
/// or head_dim is 0, head_dim is odd, numel is not a multiple of seq heads head_dim, `rope`
/// breaks rope_error's rules, or position_offset < 0.
void rotary_embedding(const Buffer& x, std::size_t seq, std::size_t heads, std::size_t head_dim,
                      const RopeFrequencies& rope, std::int64_t position_offset, Buffer& y);

/// The backward of rotary_embedding: dx is dy rotated by minus each angle (a rotation's
/// transpose is its inverse). Same sizes, arguments and errors; dx may alias dy.
void rotary_embedding_backward(const Buffer& dy, std::size_t seq, std::size_t heads,
                               std::size_t head_dim, const RopeFrequencies& rope,
                               std::int64_t position_offset, Buffer& dx);

/// SwiGLU's gate (Shazeer, "GLU Variants Improve Transformer", arXiv:2002.05202; Hugging
/// Face LlamaMLP's act_fn(gate_proj(x)) * up_proj(x)), element-wise over equal numel:
/// y = silu(gate) up, silu(g) = g sigmoid(g). y may alias gate or up.
void swiglu_forward(const Buffer& gate, const Buffer& up, Buffer& y);

/// Gradients of swiglu_forward from dy, element-wise over equal numel: with s = sigmoid(gate),
/// dgate = dy up s (1 + gate (1 - s)) and dup = dy silu(gate). gate and up are dy's dtype, or
/// both bfloat16 with dy, dgate and dup float32 (train --bf16's kept copies, widened exactly
/// element by element: the bits of the float32 call on the widened values). dgate and dup must
/// be distinct buffers; either may alias dy (each element is read before it is written). Throws
/// std::invalid_argument on other dtypes, devices that differ or numels that differ.
void swiglu_backward(const Buffer& gate, const Buffer& up, const Buffer& dy, Buffer& dgate,
                     Buffer& dup);

}  // namespace mpitron::kernels
