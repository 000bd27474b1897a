// Internal: the CUDA kernel table of TypedBackend. Plain C++ declarations, so host code includes
// it without nvcc; the definitions live in the .cu files of this folder (gemm in gemm.cpp) and are
// instantiated for float and double. Pointers are device pointers; sizes are element counts, all
// checked by ops.cpp. Everything runs on the default stream, in order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/math.h"
#include "kernels/ops.h"
#include "kernels/rope.h"

namespace mpitron::kernels::cuda {

struct Kernels {
  // elementwise.cu: one grid-stride kernel per op.
  template <class T>
  static void fill(T* out, std::size_t n, T value);
  template <class T>
  static void broadcast_scalar(const T* s, T alpha, T* out, std::size_t n);
  template <class T>
  static void add(const T* a, const T* b, T* out, std::size_t n);
  template <class T>
  static void sub(const T* a, const T* b, T* out, std::size_t n);
  template <class T>
  static void mul(const T* a, const T* b, T* out, std::size_t n);
  template <class T>
  static void scale(const T* x, T alpha, T* out, std::size_t n);
  template <class T>
  static void axpy(T alpha, const T* x, T* y, std::size_t n);
  template <class T>
  static void bias_add(const T* x, const T* bias, std::size_t rows, std::size_t cols, T* out);
  template <class T>
  static void gelu_forward(const T* x, T* y, std::size_t n, GeluForm form);
  template <class T>
  static void gelu_backward(const T* x, const T* dy, T* dx, std::size_t n, GeluForm form);
  template <class T>
  static void gelu_forward_backward(const T* x, const T* dy, T* y, T* dx, std::size_t n,
                                    GeluForm form);
  static void bias_gelu_bf16(const bf16* pre, const float* bias, std::size_t rows, std::size_t cols,
                             bf16* g, GeluForm form);
  static void bias_gelu_backward_bf16(const bf16* pre, const float* bias, std::size_t rows,
                                      std::size_t cols, float* dg, bf16* g, GeluForm form);
  template <class T>
  static void bias_gelu(T* y, const T* bias, std::size_t rows, std::size_t cols, T* g,
                        GeluForm form);
  template <class T>
  static void mse_backward(const T* pred, const T* target, const T* dloss, std::size_t n, T* dpred);
  template <class T>
  static void adamw_update(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, std::size_t n,
                           const math::AdamWHyper<T>& hyper);

  // reductions.cu: block reductions accumulating in double.
  template <class T>
  static void sum(const T* x, std::size_t n, T* out);
  template <class T>
  static void sum_rows(const T* x, std::size_t rows, std::size_t cols, T* out);
  template <class T>
  static void softmax_forward(const T* x, std::size_t rows, std::size_t cols, T* y, bool causal,
                              T scale);
  template <class T>
  static void softmax_backward(const T* y, const T* dy, std::size_t rows, std::size_t cols, T* dx,
                               T scale);
  template <class T>
  static void mse_forward(const T* pred, const T* target, std::size_t n, T* loss);
  template <class T>
  static void row_max(const T* x, std::size_t rows, std::size_t cols, std::size_t used_cols,
                      T* out);
  template <class T>
  static void sum_squares(const T* x, std::size_t n, T* out);

  // attention.cu: one block per (batch*head, query or key block), one thread per row. In is T,
  // or bfloat16 with T = float (train --bf16's kept q, k, v and o, widened as they are read).
  template <class T, class In>
  static void attention_forward(const In* q, const In* k, const In* v, std::size_t batch_heads,
                                std::size_t seq, std::size_t d, bool causal, T scale, T* o, T* lse);
  template <class T, class In>
  static void attention_backward(const In* q, const In* k, const In* v, const In* o, const T* lse,
                                 const T* dout, std::size_t batch_heads, std::size_t seq,
                                 std::size_t d, bool causal, T scale, T* dq, T* dk, T* dv);
  template <class T>
  static void attention_merge(T* o, T* lse, const T* block_o, const T* block_lse, std::size_t rows,
                              std::size_t d);

  // normalization.cu: LayerNorm, one block per row (forward, dx), one thread per column (dweight,
  // dbias).
  template <class T, class Kept>
  static void layer_norm_forward(const T* x, const T* weight, const T* bias, std::size_t rows,
                                 std::size_t cols, double eps, T* y, Kept* xhat, T* rstd);
  template <class T, class In>
  static void layer_norm_backward(const In* xhat, const T* weight, const T* rstd, const T* dy,
                                  std::size_t rows, std::size_t cols, T* dx, T* dweight, T* dbias);

  // embedding.cu: gather one thread per output element; scatter-add one thread per (column,
  // group of rows), in token order (the CPU loop's bits). I is the index type (std::int32_t or
  // std::int64_t).
  template <class T, class I>
  static void embedding_forward(const T* weight, std::size_t rows, std::size_t cols,
                                const I* indices, std::size_t n, std::int64_t first_row, T* out);
  template <class T, class I>
  static void embedding_backward(const T* dout, const I* indices, std::size_t n,
                                 std::int64_t first_row, std::size_t rows, std::size_t cols,
                                 T* dweight);

  // cross_entropy.cu: statistics one block per row, the loss in one block, the gradient one
  // thread per logit.
  template <class T, class I>
  static void cross_entropy_stats(const T* logits, std::size_t rows, std::size_t cols,
                                  std::size_t used_cols, const I* targets, std::int64_t first_col,
                                  const T* row_max, T* sum_exp, T* target_logit);
  template <class T, class I>
  static void cross_entropy_loss(const T* row_max, const T* sum_exp, const T* target_logit,
                                 const I* targets, std::size_t rows, double divisor, T* loss);
  template <class T, class I>
  static void cross_entropy_backward(const T* logits, std::size_t rows, std::size_t cols,
                                     std::size_t used_cols, const I* targets,
                                     std::int64_t first_col, const T* row_max, const T* sum_exp,
                                     const T* dloss, double divisor, T* dlogits);

  // layout_ops.cu: index arithmetic only.
  template <class T>
  static void transpose(const T* x, std::size_t outer, std::size_t d1, std::size_t mid,
                        std::size_t d2, std::size_t inner, T* y);
  template <class T>
  static void copy_rows(const T* src, std::size_t src_stride, T* dst, std::size_t dst_stride,
                        std::size_t rows, std::size_t row_len);

  // llama_ops.cu: RMSNorm one block per row (forward, dx) and one thread per column (dweight),
  // RoPE one thread per (token, pair), SwiGLU one thread per element.
  template <class T>
  static void rms_norm_forward(const T* x, const T* weight, std::size_t rows, std::size_t cols,
                               double eps, T* y, T* rstd);
  template <class T, class In>
  static void rms_norm_backward(const In* x, const T* weight, const T* rstd, const T* dy,
                                std::size_t rows, std::size_t cols, T* dx, T* dweight);
  template <class T>
  static void rotary_embedding(const T* x, std::size_t tokens, std::size_t seq, std::size_t heads,
                               std::size_t head_dim, const RopeFrequencies& rope,
                               std::int64_t position_offset, bool inverse, T* y);
  template <class T>
  static void swiglu_forward(const T* gate, const T* up, T* y, std::size_t n);
  template <class T, class In>
  static void swiglu_backward(const In* gate, const In* up, const T* dy, T* dgate, T* dup,
                              std::size_t n);

  // bf16.cu: float32 <-> bfloat16 and float32 through bfloat16, one thread per element through
  // bf16.h's functions (the CPU loops' bits).
  static void convert_to_bf16(const float* in, bf16* out, std::size_t n);
  static void convert_to_float(const bf16* in, float* out, std::size_t n);
  static void round_through_bf16(const float* in, float* out, std::size_t n);

  // gemm.cpp: cuBLAS, row-major through the column-major transpose identity.
  template <class T>
  static void gemm_batched(bool trans_a, bool trans_b, std::size_t batch, std::size_t m,
                           std::size_t n, std::size_t k, T alpha, const T* a, std::size_t stride_a,
                           const T* b, std::size_t stride_b, T beta, T* c, std::size_t stride_c);
  // cublasGemmEx: bfloat16 A and B, Out = float or bf16, float32 compute (CUBLAS_COMPUTE_32F).
  template <class Out>
  static void gemm_bf16(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                        float alpha, const bf16* a, const bf16* b, float beta, Out* c);
};

}  // namespace mpitron::kernels::cuda
