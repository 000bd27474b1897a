// Internal: the Backend ops written once for every device. `K` is a device's kernel table, a
// struct of static function templates over raw pointers (cpu::CpuKernels, cuda::CudaKernels);
// TypedBackend only picks T from the buffers' dtype and unpacks sizes, so each device implements
// the math and never the dispatch.
#pragma once

#include "kernels/backend.h"
#include "kernels/bf16.h"

namespace mpitron::kernels {

template <class K>
class TypedBackend : public Backend {
 public:
  void fill(Buffer& o, double value) override {
    dispatch_any(o.dtype(),
                 [&]<class T>(T) { K::fill(out<T>(o), o.numel(), static_cast<T>(value)); });
  }

  void broadcast_scalar(const Buffer& s, double alpha, Buffer& o) override {
    dispatch(o.dtype(), [&]<class T>(T) {
      K::broadcast_scalar(in<T>(s), static_cast<T>(alpha), out<T>(o), o.numel());
    });
  }

  void add(const Buffer& a, const Buffer& b, Buffer& o) override {
    dispatch(o.dtype(), [&]<class T>(T) { K::add(in<T>(a), in<T>(b), out<T>(o), o.numel()); });
  }

  void sub(const Buffer& a, const Buffer& b, Buffer& o) override {
    dispatch(o.dtype(), [&]<class T>(T) { K::sub(in<T>(a), in<T>(b), out<T>(o), o.numel()); });
  }

  void mul(const Buffer& a, const Buffer& b, Buffer& o) override {
    dispatch(o.dtype(), [&]<class T>(T) { K::mul(in<T>(a), in<T>(b), out<T>(o), o.numel()); });
  }

  void scale(const Buffer& x, double alpha, Buffer& o) override {
    dispatch(o.dtype(),
             [&]<class T>(T) { K::scale(in<T>(x), static_cast<T>(alpha), out<T>(o), o.numel()); });
  }

  void axpy(double alpha, const Buffer& x, Buffer& y) override {
    dispatch(y.dtype(),
             [&]<class T>(T) { K::axpy(static_cast<T>(alpha), in<T>(x), out<T>(y), y.numel()); });
  }

  void bias_add(const Buffer& x, const Buffer& bias, std::size_t cols, Buffer& o) override {
    dispatch(o.dtype(), [&]<class T>(T) {
      K::bias_add(in<T>(x), in<T>(bias), x.numel() / cols, cols, out<T>(o));
    });
  }

  void sum_rows(const Buffer& x, std::size_t cols, Buffer& o) override {
    dispatch(o.dtype(),
             [&]<class T>(T) { K::sum_rows(in<T>(x), x.numel() / cols, cols, out<T>(o)); });
  }

  void sum(const Buffer& x, Buffer& o) override {
    dispatch(o.dtype(), [&]<class T>(T) { K::sum(in<T>(x), x.numel(), out<T>(o)); });
  }

  void gelu_forward(const Buffer& x, Buffer& y, GeluForm form) override {
    dispatch(y.dtype(), [&]<class T>(T) { K::gelu_forward(in<T>(x), out<T>(y), y.numel(), form); });
  }

  void gelu_backward(const Buffer& x, const Buffer& dy, Buffer& dx, GeluForm form) override {
    dispatch(dx.dtype(), [&]<class T>(T) {
      K::gelu_backward(in<T>(x), in<T>(dy), out<T>(dx), dx.numel(), form);
    });
  }

  void gelu_forward_backward(const Buffer& x, const Buffer& dy, Buffer& y, Buffer& dx,
                             GeluForm form) override {
    dispatch(dx.dtype(), [&]<class T>(T) {
      K::gelu_forward_backward(in<T>(x), in<T>(dy), out<T>(y), out<T>(dx), dx.numel(), form);
    });
  }

  void bias_gelu(Buffer& y, const Buffer& bias, std::size_t cols, Buffer& g,
                 GeluForm form) override {
    dispatch(g.dtype(), [&]<class T>(T) {
      K::bias_gelu(out<T>(y), in<T>(bias), y.numel() / cols, cols, out<T>(g), form);
    });
  }

  void bias_gelu_bf16(const Buffer& pre, const Buffer& bias, std::size_t cols, Buffer& g,
                      GeluForm form) override {
    K::bias_gelu_bf16(in<bf16>(pre), in<float>(bias), pre.numel() / cols, cols, out<bf16>(g), form);
  }

  void bias_gelu_backward_bf16(const Buffer& pre, const Buffer& bias, std::size_t cols, Buffer& dg,
                               Buffer& g, GeluForm form) override {
    K::bias_gelu_backward_bf16(in<bf16>(pre), in<float>(bias), pre.numel() / cols, cols,
                               out<float>(dg), out<bf16>(g), form);
  }

  void softmax_forward(const Buffer& x, std::size_t cols, Buffer& y, bool causal,
                       double scale) override {
    dispatch(y.dtype(), [&]<class T>(T) {
      K::softmax_forward(in<T>(x), x.numel() / cols, cols, out<T>(y), causal,
                         static_cast<T>(scale));
    });
  }

  void softmax_backward(const Buffer& y, const Buffer& dy, std::size_t cols, Buffer& dx,
                        double scale) override {
    dispatch(dx.dtype(), [&]<class T>(T) {
      K::softmax_backward(in<T>(y), in<T>(dy), y.numel() / cols, cols, out<T>(dx),
                          static_cast<T>(scale));
    });
  }

  void attention_forward(const Buffer& q, const Buffer& k, const Buffer& v, std::size_t seq,
                         std::size_t head_dim, bool causal, double scale, Buffer& o,
                         Buffer& lse) override {
    dispatch_kept(q, o, [&]<class T, class In>(T, In) {
      K::attention_forward(in<In>(q), in<In>(k), in<In>(v), lse.numel() / seq, seq, head_dim,
                           causal, static_cast<T>(scale), out<T>(o), out<T>(lse));
    });
  }

  void attention_backward(const Buffer& q, const Buffer& k, const Buffer& v, const Buffer& o,
                          const Buffer& lse, const Buffer& dout, std::size_t seq,
                          std::size_t head_dim, bool causal, double scale, Buffer& dq, Buffer& dk,
                          Buffer& dv) override {
    dispatch_kept(q, dq, [&]<class T, class In>(T, In) {
      K::attention_backward(in<In>(q), in<In>(k), in<In>(v), in<In>(o), in<T>(lse), in<T>(dout),
                            lse.numel() / seq, seq, head_dim, causal, static_cast<T>(scale),
                            out<T>(dq), out<T>(dk), out<T>(dv));
    });
  }

  void attention_merge(Buffer& o, Buffer& lse, const Buffer& block_o, const Buffer& block_lse,
                       std::size_t head_dim) override {
    dispatch(o.dtype(), [&]<class T>(T) {
      K::attention_merge(out<T>(o), out<T>(lse), in<T>(block_o), in<T>(block_lse), lse.numel(),
                         head_dim);
    });
  }

  void mse_forward(const Buffer& pred, const Buffer& target, Buffer& loss) override {
    dispatch(loss.dtype(), [&]<class T>(T) {
      K::mse_forward(in<T>(pred), in<T>(target), pred.numel(), out<T>(loss));
    });
  }

  void mse_backward(const Buffer& pred, const Buffer& target, const Buffer& dloss,
                    Buffer& dpred) override {
    dispatch(dpred.dtype(), [&]<class T>(T) {
      K::mse_backward(in<T>(pred), in<T>(target), in<T>(dloss), pred.numel(), out<T>(dpred));
    });
  }

  void gemm_batched(bool trans_a, bool trans_b, std::size_t batch, std::size_t m, std::size_t n,
                    std::size_t k, double alpha, const Buffer& a, std::size_t stride_a,
                    const Buffer& b, std::size_t stride_b, double beta, Buffer& c,
                    std::size_t stride_c) override {
    dispatch(c.dtype(), [&]<class T>(T) {
      K::gemm_batched(trans_a, trans_b, batch, m, n, k, static_cast<T>(alpha), in<T>(a), stride_a,
                      in<T>(b), stride_b, static_cast<T>(beta), out<T>(c), stride_c);
    });
  }

  void gemm_bf16(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                 double alpha, const Buffer& a, const Buffer& b, double beta, Buffer& c) override {
    const auto multiply = [&](auto* out) {
      K::gemm_bf16(trans_a, trans_b, m, n, k, static_cast<float>(alpha), in<bf16>(a), in<bf16>(b),
                   static_cast<float>(beta), out);
    };
    if (c.dtype() == DType::bf16) {
      multiply(out<bf16>(c));
    } else {
      multiply(out<float>(c));
    }
  }

  void layer_norm_forward(const Buffer& x, const Buffer& weight, const Buffer& bias,
                          std::size_t cols, double eps, Buffer& y, Buffer& xhat,
                          Buffer& rstd) override {
    dispatch_kept(xhat, y, [&]<class T, class Kept>(T, Kept) {
      K::layer_norm_forward(in<T>(x), in<T>(weight), in<T>(bias), x.numel() / cols, cols, eps,
                            out<T>(y), out<Kept>(xhat), out<T>(rstd));
    });
  }

  void layer_norm_backward(const Buffer& xhat, const Buffer& weight, const Buffer& rstd,
                           const Buffer& dy, std::size_t cols, Buffer& dx, Buffer& dweight,
                           Buffer& dbias) override {
    dispatch_kept(xhat, dx, [&]<class T, class In>(T, In) {
      K::layer_norm_backward(in<In>(xhat), in<T>(weight), in<T>(rstd), in<T>(dy),
                             xhat.numel() / cols, cols, out<T>(dx), out<T>(dweight), out<T>(dbias));
    });
  }

  void embedding_forward(const Buffer& weight, std::size_t cols, const Buffer& indices,
                         std::int64_t first_row, Buffer& o) override {
    dispatch(o.dtype(), [&]<class T>(T) {
      dispatch_index(indices.dtype(), [&]<class I>(I) {
        K::embedding_forward(in<T>(weight), weight.numel() / cols, cols, in<I>(indices),
                             indices.numel(), first_row, out<T>(o));
      });
    });
  }

  void embedding_backward(const Buffer& dout, const Buffer& indices, std::int64_t first_row,
                          std::size_t cols, Buffer& dweight) override {
    dispatch(dweight.dtype(), [&]<class T>(T) {
      dispatch_index(indices.dtype(), [&]<class I>(I) {
        K::embedding_backward(in<T>(dout), in<I>(indices), indices.numel(), first_row,
                              dweight.numel() / cols, cols, out<T>(dweight));
      });
    });
  }

  void row_max(const Buffer& x, std::size_t cols, std::size_t used_cols, Buffer& o) override {
    dispatch(o.dtype(), [&]<class T>(T) {
      K::row_max(in<T>(x), x.numel() / cols, cols, used_cols, out<T>(o));
    });
  }

  void cross_entropy_stats(const Buffer& logits, std::size_t cols, std::size_t used_cols,
                           const Buffer& targets, std::int64_t first_col, const Buffer& row_max,
                           Buffer& sum_exp, Buffer& target_logit) override {
    dispatch(logits.dtype(), [&]<class T>(T) {
      dispatch_index(targets.dtype(), [&]<class I>(I) {
        K::cross_entropy_stats(in<T>(logits), logits.numel() / cols, cols, used_cols,
                               in<I>(targets), first_col, in<T>(row_max), out<T>(sum_exp),
                               out<T>(target_logit));
      });
    });
  }

  void cross_entropy_loss(const Buffer& row_max, const Buffer& sum_exp, const Buffer& target_logit,
                          const Buffer& targets, double divisor, Buffer& loss) override {
    dispatch(loss.dtype(), [&]<class T>(T) {
      dispatch_index(targets.dtype(), [&]<class I>(I) {
        K::cross_entropy_loss(in<T>(row_max), in<T>(sum_exp), in<T>(target_logit), in<I>(targets),
                              row_max.numel(), divisor, out<T>(loss));
      });
    });
  }

  void cross_entropy_backward(const Buffer& logits, std::size_t cols, std::size_t used_cols,
                              const Buffer& targets, std::int64_t first_col, const Buffer& row_max,
                              const Buffer& sum_exp, const Buffer& dloss, double divisor,
                              Buffer& dlogits) override {
    dispatch(logits.dtype(), [&]<class T>(T) {
      dispatch_index(targets.dtype(), [&]<class I>(I) {
        K::cross_entropy_backward(in<T>(logits), logits.numel() / cols, cols, used_cols,
                                  in<I>(targets), first_col, in<T>(row_max), in<T>(sum_exp),
                                  in<T>(dloss), divisor, out<T>(dlogits));
      });
    });
  }

  void adamw_update(Buffer& param, const Buffer& grad, Buffer& exp_avg, Buffer& exp_avg_sq,
                    const math::AdamWHyper<double>& hyper) override {
    dispatch(param.dtype(), [&]<class T>(T) {
      K::adamw_update(out<T>(param), in<T>(grad), out<T>(exp_avg), out<T>(exp_avg_sq),
                      param.numel(), hyper.as<T>());
    });
  }

  void sum_squares(const Buffer& x, Buffer& o) override {
    dispatch(o.dtype(), [&]<class T>(T) { K::sum_squares(in<T>(x), x.numel(), out<T>(o)); });
  }

  void transpose(const Buffer& x, std::size_t outer, std::size_t d1, std::size_t mid,
                 std::size_t d2, std::size_t inner, Buffer& y) override {
    dispatch_any(y.dtype(),
                 [&]<class T>(T) { K::transpose(in<T>(x), outer, d1, mid, d2, inner, out<T>(y)); });
  }

  void convert(const Buffer& src, Buffer& dst) override {
    if (dst.dtype() == DType::bf16) {
      K::convert_to_bf16(in<float>(src), out<bf16>(dst), dst.numel());
    } else {
      K::convert_to_float(in<bf16>(src), out<float>(dst), dst.numel());
    }
  }

  void round_through_bf16(const Buffer& src, Buffer& dst) override {
    K::round_through_bf16(in<float>(src), out<float>(dst), dst.numel());
  }

  void copy_rows(const Buffer& src, std::size_t src_offset, std::size_t src_stride, Buffer& dst,
                 std::size_t dst_offset, std::size_t dst_stride, std::size_t rows,
                 std::size_t row_len) override {
    const auto copy = [&]<class T>(T) {
      K::copy_rows(in<T>(src) + src_offset, src_stride, out<T>(dst) + dst_offset, dst_stride, rows,
                   row_len);
    };
    if (dst.dtype() == DType::bf16) {
      copy(bf16{});
    } else {
      dispatch_any(dst.dtype(), copy);
    }
  }

  void rms_norm_forward(const Buffer& x, const Buffer& weight, std::size_t cols, double eps,
                        Buffer& y, Buffer& rstd) override {
    dispatch(y.dtype(), [&]<class T>(T) {
      K::rms_norm_forward(in<T>(x), in<T>(weight), x.numel() / cols, cols, eps, out<T>(y),
                          out<T>(rstd));
    });
  }

  void rms_norm_backward(const Buffer& x, const Buffer& weight, const Buffer& rstd,
                         const Buffer& dy, std::size_t cols, Buffer& dx, Buffer& dweight) override {
    dispatch_kept(x, dx, [&]<class T, class In>(T, In) {
      K::rms_norm_backward(in<In>(x), in<T>(weight), in<T>(rstd), in<T>(dy), x.numel() / cols, cols,
                           out<T>(dx), out<T>(dweight));
    });
  }

  void rotary_embedding(const Buffer& x, std::size_t seq, std::size_t heads, std::size_t head_dim,
                        const RopeFrequencies& rope, std::int64_t position_offset, bool inverse,
                        Buffer& y) override {
    dispatch(y.dtype(), [&]<class T>(T) {
      K::rotary_embedding(in<T>(x), x.numel() / (heads * head_dim), seq, heads, head_dim, rope,
                          position_offset, inverse, out<T>(y));
    });
  }

  void swiglu_forward(const Buffer& gate, const Buffer& up, Buffer& y) override {
    dispatch(y.dtype(),
             [&]<class T>(T) { K::swiglu_forward(in<T>(gate), in<T>(up), out<T>(y), y.numel()); });
  }

  void swiglu_backward(const Buffer& gate, const Buffer& up, const Buffer& dy, Buffer& dgate,
                       Buffer& dup) override {
    dispatch_kept(gate, dgate, [&]<class T, class In>(T, In) {
      K::swiglu_backward(in<In>(gate), in<In>(up), in<T>(dy), out<T>(dgate), out<T>(dup),
                         gate.numel());
    });
  }

 private:
  // An op reading an activation a forward kept (a backward, or attention's forward reading the
  // kept q, k and v), or writing one (LayerNorm's forward writing xhat): f(T{}, In{}) with
  // In = bf16 and T = float when `kept` is bfloat16 (train --bf16's keep;
  // checks::same_place_kept allows only that pairing), else In = T = the dtype of `result`.
  template <class F>
  static void dispatch_kept(const Buffer& kept, const Buffer& result, F&& f) {
    if (kept.dtype() == DType::bf16) {
      f(float{}, bf16{});
      return;
    }
    dispatch(result.dtype(), [&]<class T>(T) { f(T{}, T{}); });
  }

  template <class T>
  static const T* in(const Buffer& buffer) {
    return buffer.data_as<T>();
  }

  template <class T>
  static T* out(Buffer& buffer) {
    return buffer.data_as<T>();
  }
};

}  // namespace mpitron::kernels
