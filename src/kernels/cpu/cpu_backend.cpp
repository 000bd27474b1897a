// The CPU backend: host memory from aligned operator new, math from the loops in this folder.
#include <cstring>
#include <functional>
#include <new>

#include "kernels/backend.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layout.h"
#include "kernels/cpu/reductions.h"

namespace mpitron::kernels {
namespace {

constexpr std::align_val_t kAlignment{64};  // one cache line, enough for any SIMD load

template <class T>
const T* in(const Buffer& buffer) {
  return buffer.data_as<T>();
}

template <class T>
T* out(Buffer& buffer) {
  return buffer.data_as<T>();
}

class CpuBackend final : public Backend {
 public:
  CpuBackend() { cpu_threads(); }  // applies MPITRON_CPU_THREADS before the first GEMM

  void* allocate(std::size_t bytes) noexcept override {
    return ::operator new(bytes, kAlignment, std::nothrow);
  }
  void deallocate(void* ptr) noexcept override { ::operator delete(ptr, kAlignment); }
  void* allocate_host(std::size_t bytes) noexcept override { return allocate(bytes); }
  void deallocate_host(void* ptr) noexcept override { deallocate(ptr); }
  void copy_bytes(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void synchronize() override {}

  void fill(Buffer& o, double value) override {
    dispatch(o.dtype(),
             [&]<class T>(T) { cpu::fill(out<T>(o), o.numel(), static_cast<T>(value)); });
  }

  void broadcast_scalar(const Buffer& s, double alpha, Buffer& o) override {
    dispatch(o.dtype(), [&]<class T>(T) {
      cpu::fill(out<T>(o), o.numel(), static_cast<T>(alpha * in<T>(s)[0]));
    });
  }

  void add(const Buffer& a, const Buffer& b, Buffer& o) override { binary(a, b, o, std::plus<>{}); }
  void sub(const Buffer& a, const Buffer& b, Buffer& o) override {
    binary(a, b, o, std::minus<>{});
  }
  void mul(const Buffer& a, const Buffer& b, Buffer& o) override {
    binary(a, b, o, std::multiplies<>{});
  }

  void scale(const Buffer& x, double alpha, Buffer& o) override {
    dispatch(o.dtype(), [&]<class T>(T) {
      const T s = static_cast<T>(alpha);
      cpu::unary(in<T>(x), out<T>(o), o.numel(), [s](T v) { return s * v; });
    });
  }

  void axpy(double alpha, const Buffer& x, Buffer& y) override {
    dispatch(y.dtype(), [&]<class T>(T) {
      const T s = static_cast<T>(alpha);
      cpu::binary(in<T>(x), in<T>(y), out<T>(y), y.numel(),
                  [s](T xv, T yv) { return yv + s * xv; });
    });
  }

  void bias_add(const Buffer& x, const Buffer& bias, std::size_t cols, Buffer& o) override {
    dispatch(o.dtype(), [&]<class T>(T) {
      cpu::bias_add(in<T>(x), in<T>(bias), x.numel() / cols, cols, out<T>(o));
    });
  }

  void sum_rows(const Buffer& x, std::size_t cols, Buffer& o) override {
    dispatch(o.dtype(),
             [&]<class T>(T) { cpu::sum_rows(in<T>(x), x.numel() / cols, cols, out<T>(o)); });
  }

  void sum(const Buffer& x, Buffer& o) override {
    dispatch(o.dtype(),
             [&]<class T>(T) { out<T>(o)[0] = static_cast<T>(cpu::sum(in<T>(x), x.numel())); });
  }

  void gelu_forward(const Buffer& x, Buffer& y, GeluForm form) override {
    dispatch(y.dtype(),
             [&]<class T>(T) { cpu::gelu_forward(in<T>(x), out<T>(y), y.numel(), form); });
  }

  void gelu_backward(const Buffer& x, const Buffer& dy, Buffer& dx, GeluForm form) override {
    dispatch(dx.dtype(), [&]<class T>(T) {
      cpu::gelu_backward(in<T>(x), in<T>(dy), out<T>(dx), dx.numel(), form);
    });
  }

  void softmax_forward(const Buffer& x, std::size_t cols, Buffer& y) override {
    dispatch(y.dtype(), [&]<class T>(T) {
      cpu::softmax_forward(in<T>(x), x.numel() / cols, cols, out<T>(y));
    });
  }

  void softmax_backward(const Buffer& y, const Buffer& dy, std::size_t cols, Buffer& dx) override {
    dispatch(dx.dtype(), [&]<class T>(T) {
      cpu::softmax_backward(in<T>(y), in<T>(dy), y.numel() / cols, cols, out<T>(dx));
    });
  }

  void mse_forward(const Buffer& pred, const Buffer& target, Buffer& loss) override {
    dispatch(loss.dtype(), [&]<class T>(T) {
      out<T>(loss)[0] = static_cast<T>(cpu::mse(in<T>(pred), in<T>(target), pred.numel()));
    });
  }

  void mse_backward(const Buffer& pred, const Buffer& target, const Buffer& dloss,
                    Buffer& dpred) override {
    dispatch(dpred.dtype(), [&]<class T>(T) {
      const T coef = static_cast<T>(2.0 * in<T>(dloss)[0] / static_cast<double>(pred.numel()));
      cpu::binary(in<T>(pred), in<T>(target), out<T>(dpred), pred.numel(),
                  [coef](T p, T t) { return coef * (p - t); });
    });
  }

  void gemm_batched(bool trans_a, bool trans_b, std::size_t batch, std::size_t m, std::size_t n,
                    std::size_t k, double alpha, const Buffer& a, std::size_t stride_a,
                    const Buffer& b, std::size_t stride_b, double beta, Buffer& c,
                    std::size_t stride_c) override {
    dispatch(c.dtype(), [&]<class T>(T) {
      cpu::gemm_batched(trans_a, trans_b, batch, m, n, k, static_cast<T>(alpha), in<T>(a), stride_a,
                        in<T>(b), stride_b, static_cast<T>(beta), out<T>(c), stride_c);
    });
  }

  void transpose(const Buffer& x, std::size_t outer, std::size_t d1, std::size_t mid,
                 std::size_t d2, std::size_t inner, Buffer& y) override {
    dispatch(y.dtype(),
             [&]<class T>(T) { cpu::transpose(in<T>(x), outer, d1, mid, d2, inner, out<T>(y)); });
  }

  void copy_rows(const Buffer& src, std::size_t src_offset, std::size_t src_stride, Buffer& dst,
                 std::size_t dst_offset, std::size_t dst_stride, std::size_t rows,
                 std::size_t row_len) override {
    dispatch(dst.dtype(), [&]<class T>(T) {
      cpu::copy_rows(in<T>(src) + src_offset, src_stride, out<T>(dst) + dst_offset, dst_stride,
                     rows, row_len);
    });
  }

 private:
  template <class F>
  static void binary(const Buffer& a, const Buffer& b, Buffer& o, F f) {
    dispatch(o.dtype(), [&]<class T>(T) {
      cpu::binary(in<T>(a), in<T>(b), out<T>(o), o.numel(), [f](T x, T y) { return T(f(x, y)); });
    });
  }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend instance;
  return instance;
}

}  // namespace mpitron::kernels
