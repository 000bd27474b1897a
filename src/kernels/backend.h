// Internal: one interface with a virtual per op, implemented once for the CPU (cpu/) and once for
// CUDA (cuda/). The public free functions in ops.cpp validate their arguments and then call
// backend(device), so no backend repeats the checks and a build without CUDA needs no stubs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/device.h"
#include "kernels/math.h"
#include "kernels/ops.h"
#include "kernels/rope.h"

namespace mpitron::kernels {

/// The math and memory of one device. Every op receives arguments already validated by ops.cpp
/// (same device, same dtype, consistent sizes), so implementations only dispatch on the dtype.
class Backend {
 public:
  virtual ~Backend() = default;

  /// Uncached device memory of `bytes` bytes, or nullptr when the device is out of memory.
  virtual void* allocate(std::size_t bytes) noexcept = 0;
  virtual void deallocate(void* ptr) noexcept = 0;
  /// Uncached host memory suited to staging this device's buffers (pinned for CUDA), or nullptr.
  virtual void* allocate_host(std::size_t bytes) noexcept = 0;
  virtual void deallocate_host(void* ptr) noexcept = 0;
  /// Copies `bytes` bytes between host memory and/or this device's memory, synchronously.
  virtual void copy_bytes(void* dst, const void* src, std::size_t bytes) = 0;
  /// Waits for all queued work.
  virtual void synchronize() = 0;

  virtual void fill(Buffer& out, double value) = 0;
  virtual void broadcast_scalar(const Buffer& s, double alpha, Buffer& out) = 0;
  virtual void add(const Buffer& a, const Buffer& b, Buffer& out) = 0;
  virtual void sub(const Buffer& a, const Buffer& b, Buffer& out) = 0;
  virtual void mul(const Buffer& a, const Buffer& b, Buffer& out) = 0;
  virtual void scale(const Buffer& x, double alpha, Buffer& out) = 0;
  virtual void axpy(double alpha, const Buffer& x, Buffer& y) = 0;
  virtual void bias_add(const Buffer& x, const Buffer& bias, std::size_t cols, Buffer& out) = 0;
  virtual void sum_rows(const Buffer& x, std::size_t cols, Buffer& out) = 0;
  virtual void sum(const Buffer& x, Buffer& out) = 0;
  virtual void gelu_forward(const Buffer& x, Buffer& y, GeluForm form) = 0;
  virtual void gelu_backward(const Buffer& x, const Buffer& dy, Buffer& dx, GeluForm form) = 0;
  virtual void gelu_forward_backward(const Buffer& x, const Buffer& dy, Buffer& y, Buffer& dx,
                                     GeluForm form) = 0;
  virtual void bias_gelu(Buffer& y, const Buffer& bias, std::size_t cols, Buffer& g,
                         GeluForm form) = 0;
  virtual void bias_gelu_bf16(const Buffer& pre, const Buffer& bias, std::size_t cols, Buffer& g,
                              GeluForm form) = 0;
  virtual void bias_gelu_backward_bf16(const Buffer& pre, const Buffer& bias, std::size_t cols,
                                       Buffer& dg, Buffer& g, GeluForm form) = 0;
  virtual void softmax_forward(const Buffer& x, std::size_t cols, Buffer& y, bool causal,
                               double scale) = 0;
  virtual void softmax_backward(const Buffer& y, const Buffer& dy, std::size_t cols, Buffer& dx,
                                double scale) = 0;
  /// batch_heads = numel / (seq head_dim) > 0 here.
  virtual void attention_forward(const Buffer& q, const Buffer& k, const Buffer& v, std::size_t seq,
                                 std::size_t head_dim, bool causal, double scale, Buffer& o,
                                 Buffer& lse) = 0;
  virtual void attention_backward(const Buffer& q, const Buffer& k, const Buffer& v,
                                  const Buffer& o, const Buffer& lse, const Buffer& dout,
                                  std::size_t seq, std::size_t head_dim, bool causal, double scale,
                                  Buffer& dq, Buffer& dk, Buffer& dv) = 0;
  /// rows = lse.numel() > 0 here.
  virtual void attention_merge(Buffer& o, Buffer& lse, const Buffer& block_o,
                               const Buffer& block_lse, std::size_t head_dim) = 0;
  virtual void mse_forward(const Buffer& pred, const Buffer& target, Buffer& loss) = 0;
  virtual void mse_backward(const Buffer& pred, const Buffer& target, const Buffer& dloss,
                            Buffer& dpred) = 0;
  /// `gemm` is `gemm_batched` with batch 1; batch, m, n > 0 here; k == 0 leaves C = beta C.
  virtual void gemm_batched(bool trans_a, bool trans_b, std::size_t batch, std::size_t m,
                            std::size_t n, std::size_t k, double alpha, const Buffer& a,
                            std::size_t stride_a, const Buffer& b, std::size_t stride_b,
                            double beta, Buffer& c, std::size_t stride_c) = 0;
  /// a, b bfloat16, c float32 or bfloat16 (ops.cpp checked them); m, n > 0 here.
  virtual void gemm_bf16(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                         double alpha, const Buffer& a, const Buffer& b, double beta,
                         Buffer& c) = 0;
  virtual void layer_norm_forward(const Buffer& x, const Buffer& weight, const Buffer& bias,
                                  std::size_t cols, double eps, Buffer& y, Buffer& xhat,
                                  Buffer& rstd) = 0;
  virtual void layer_norm_backward(const Buffer& xhat, const Buffer& weight, const Buffer& rstd,
                                   const Buffer& dy, std::size_t cols, Buffer& dx, Buffer& dweight,
                                   Buffer& dbias) = 0;
  virtual void embedding_forward(const Buffer& weight, std::size_t cols, const Buffer& indices,
                                 std::int64_t first_row, Buffer& out) = 0;
  virtual void embedding_backward(const Buffer& dout, const Buffer& indices, std::int64_t first_row,
                                  std::size_t cols, Buffer& dweight) = 0;
  virtual void row_max(const Buffer& x, std::size_t cols, std::size_t used_cols, Buffer& out) = 0;
  virtual void cross_entropy_stats(const Buffer& logits, std::size_t cols, std::size_t used_cols,
                                   const Buffer& targets, std::int64_t first_col,
                                   const Buffer& row_max, Buffer& sum_exp,
                                   Buffer& target_logit) = 0;
  virtual void cross_entropy_loss(const Buffer& row_max, const Buffer& sum_exp,
                                  const Buffer& target_logit, const Buffer& targets, double divisor,
                                  Buffer& loss) = 0;
  virtual void cross_entropy_backward(const Buffer& logits, std::size_t cols, std::size_t used_cols,
                                      const Buffer& targets, std::int64_t first_col,
                                      const Buffer& row_max, const Buffer& sum_exp,
                                      const Buffer& dloss, double divisor, Buffer& dlogits) = 0;
  /// `hyper` holds the step's scalars, already derived from lr, betas, eps, wd and step.
  virtual void adamw_update(Buffer& param, const Buffer& grad, Buffer& exp_avg, Buffer& exp_avg_sq,
                            const math::AdamWHyper<double>& hyper) = 0;
  virtual void sum_squares(const Buffer& x, Buffer& out) = 0;
  virtual void transpose(const Buffer& x, std::size_t outer, std::size_t d1, std::size_t mid,
                         std::size_t d2, std::size_t inner, Buffer& y) = 0;
  /// float32 -> bfloat16 (bf16.h's rule) or bfloat16 -> float32 (exact); the pair and equal
  /// numel > 0 checked by ops.cpp.
  virtual void convert(const Buffer& src, Buffer& dst) = 0;
  /// float32 -> float32 through bfloat16 in one pass (dst may be src); equal numel > 0 and the
  /// dtypes checked by ops.cpp.
  virtual void round_through_bf16(const Buffer& src, Buffer& dst) = 0;
  virtual void copy_rows(const Buffer& src, std::size_t src_offset, std::size_t src_stride,
                         Buffer& dst, std::size_t dst_offset, std::size_t dst_stride,
                         std::size_t rows, std::size_t row_len) = 0;
  // The Llama family's ops (kernels/llama_ops.h); `inverse` rotates by minus each angle.
  virtual void rms_norm_forward(const Buffer& x, const Buffer& weight, std::size_t cols, double eps,
                                Buffer& y, Buffer& rstd) = 0;
  virtual void rms_norm_backward(const Buffer& x, const Buffer& weight, const Buffer& rstd,
                                 const Buffer& dy, std::size_t cols, Buffer& dx,
                                 Buffer& dweight) = 0;
  virtual void rotary_embedding(const Buffer& x, std::size_t seq, std::size_t heads,
                                std::size_t head_dim, const RopeFrequencies& rope,
                                std::int64_t position_offset, bool inverse, Buffer& y) = 0;
  virtual void swiglu_forward(const Buffer& gate, const Buffer& up, Buffer& y) = 0;
  virtual void swiglu_backward(const Buffer& gate, const Buffer& up, const Buffer& dy,
                               Buffer& dgate, Buffer& dup) = 0;
};

/// The backend of `device`, created on first use (for cuda: the CUDA module is loaded then).
/// Throws std::runtime_error for cuda when the module is not installed, no CUDA device is
/// visible, or the module cannot be loaded.
Backend& backend(Device device);

/// The CPU backend (cpu/cpu_backend.cpp).
Backend& cpu_backend();

}  // namespace mpitron::kernels
