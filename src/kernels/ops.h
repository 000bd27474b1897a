// Raw math on buffers: every op mpitron's autograd needs, on CPU (Eigen GEMM, hand-written loops)
// and CUDA (cuBLAS GEMM, hand-written kernels). No autograd, no MPI.
//
// Conventions for every function here:
// - All buffers of one call must be on the same device and have the same dtype; otherwise
//   std::invalid_argument names the op and the offending buffers' devices/dtypes. The dtype is
//   float32 or float64, except for fill, transpose and copy_rows (any dtype, integers included)
//   and for the index arguments (`indices`, `targets`: int32 or int64) of the embedding and
//   cross-entropy ops; an integer buffer anywhere else is std::invalid_argument naming the op.
// - Sizes are element counts. A size that does not match a buffer's numel throws
//   std::invalid_argument naming the op and both sizes.
// - `out` may alias an input for the element-wise ops (not for gemm, transpose or copy_rows).
// - Work is queued on the device's stream; results are visible to later ops on the same device
//   and to `Buffer::to` / `copy` (which synchronize).
#pragma once

#include <cstddef>

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

/// dx = dy * gelu'(x), element-wise (x is the forward input).
void gelu_backward(const Buffer& x, const Buffer& dy, Buffer& dx, GeluForm form);

/// Numerically stable softmax over the last dim: x and y are [rows, cols];
/// y[r, c] = exp(x[r, c] - max_c x[r, :]) / sum_c' exp(x[r, c'] - max). Finite for inputs such as
/// [1000, 1000] or [151.29, 0, -151.29].
void softmax_forward(const Buffer& x, std::size_t cols, Buffer& y);

/// dx[r, c] = y[r, c] * (dy[r, c] - sum_c' dy[r, c'] y[r, c']): y (the forward output), dy and
/// dx are [rows, cols].
void softmax_backward(const Buffer& y, const Buffer& dy, std::size_t cols, Buffer& dx);

/// loss[0] = mean_i (pred[i] - target[i])^2 (torch.nn.functional.mse_loss, reduction "mean");
/// loss has one element.
void mse_forward(const Buffer& pred, const Buffer& target, Buffer& loss);

/// dpred[i] = dloss[0] * 2 (pred[i] - target[i]) / numel; dloss has one element.
void mse_backward(const Buffer& pred, const Buffer& target, const Buffer& dloss, Buffer& dpred);

/// Row-major GEMM: C[m, n] = alpha * op(A) op(B) + beta * C, where op(A) is [m, k] (A is stored
/// [m, k], or [k, m] when `trans_a`) and op(B) is [k, n] (B stored [k, n], or [n, k] when
/// `trans_b`). beta = 0 ignores C's old contents (NaN-safe). Eigen on CPU, cuBLAS on CUDA.
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
          const Buffer& a, const Buffer& b, double beta, Buffer& c);

/// `batch` independent row-major GEMMs as in `gemm`, the i-th reading A at element offset
/// i * stride_a, B at i * stride_b and writing C at i * stride_c. A stride of 0 reuses one matrix
/// for the whole batch. Used by attention ([batch*heads, seq, head_dim] products).
void gemm_batched(bool trans_a, bool trans_b, std::size_t batch, std::size_t m, std::size_t n,
                  std::size_t k, double alpha, const Buffer& a, std::size_t stride_a,
                  const Buffer& b, std::size_t stride_b, double beta, Buffer& c,
                  std::size_t stride_c);

/// Swaps two dims: x viewed as [outer, d1, mid, d2, inner] is written to y as
/// [outer, d2, mid, d1, inner]. Any row-major transpose of two dims has this form (e.g.
/// [b, s, h, d] -> [b, h, s, d] is outer=b, d1=s, mid=1, d2=h, inner=d).
void transpose(const Buffer& x, std::size_t outer, std::size_t d1, std::size_t mid, std::size_t d2,
               std::size_t inner, Buffer& y);

/// Strided block copy: for r in [0, rows), copies `row_len` contiguous elements from
/// src[src_offset + r * src_stride] to dst[dst_offset + r * dst_stride]. Split, concat and
/// narrow along any dim are this copy. Throws std::out_of_range past either buffer's end.
void copy_rows(const Buffer& src, std::size_t src_offset, std::size_t src_stride, Buffer& dst,
               std::size_t dst_offset, std::size_t dst_stride, std::size_t rows,
               std::size_t row_len);

/// Sets the number of threads CPU kernels (Eigen GEMM) may use; default 1, because the ranks of
/// one machine already share its cores. The environment variable MPITRON_CPU_THREADS sets the
/// initial value. Throws std::invalid_argument when `threads` < 1.
void set_cpu_threads(int threads);

/// The current CPU thread count.
int cpu_threads();

}  // namespace mpitron::kernels
