// The CPU backend: host memory from aligned operator new, math from the loops in this folder.
#include <cstring>
#include <new>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/bf16_convert.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layout_ops.h"
#include "kernels/cpu/llama_ops.h"
#include "kernels/cpu/normalization.h"
#include "kernels/cpu/reductions.h"
#include "kernels/typed_backend.h"

namespace mpitron::kernels {
namespace {

/// The CPU kernel table of TypedBackend.
struct CpuKernels : cpu::Elementwise,
                    cpu::Attention,
                    cpu::Reductions,
                    cpu::Normalization,
                    cpu::Embedding,
                    cpu::CrossEntropy,
                    cpu::Layout,
                    cpu::Bf16Convert,
                    cpu::Gemm,
                    cpu::LlamaOps {};

constexpr std::align_val_t kAlignment{64};  // one cache line, enough for any SIMD load

class CpuBackend final : public TypedBackend<CpuKernels> {
 public:
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
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend instance;
  return instance;
}

}  // namespace mpitron::kernels
