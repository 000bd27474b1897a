// The CUDA backend: cudaMalloc'd device memory, cudaMallocHost'd (pinned) staging memory, and
// the kernels of this folder. Everything runs on the default stream of the current device.
// Built as the module libmpitron_cuda.so; its entry points are declared in kernels/cuda_module.h.
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda_module.h"
#include "kernels/typed_backend.h"

namespace mpitron::kernels {
namespace {

class CudaBackend final : public TypedBackend<cuda::Kernels> {
 public:
  void* allocate(std::size_t bytes) noexcept override {
    void* ptr = nullptr;
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) {
      static_cast<void>(cudaGetLastError());  // out of memory is not sticky: clear it
      return nullptr;
    }
    return ptr;
  }

  // Errors here can only come from a context already torn down at exit; nothing to recover.
  void deallocate(void* ptr) noexcept override { static_cast<void>(cudaFree(ptr)); }

  void* allocate_host(std::size_t bytes) noexcept override {
    void* ptr = nullptr;
    if (cudaMallocHost(&ptr, bytes) != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      return nullptr;
    }
    return ptr;
  }

  void deallocate_host(void* ptr) noexcept override { static_cast<void>(cudaFreeHost(ptr)); }

  // cudaMemcpyDefault reads the direction from the pointers (unified virtual addressing); the
  // copy waits for earlier work on the default stream.
  void copy_bytes(void* dst, const void* src, std::size_t bytes) override {
    MPITRON_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  }

  void synchronize() override { MPITRON_CUDA_CHECK(cudaDeviceSynchronize()); }
};

}  // namespace

}  // namespace mpitron::kernels

const char* mpitron_cuda_module_check() noexcept {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());  // e.g. cudaErrorNoDevice, cudaErrorInsufficientDriver
    return cudaGetErrorString(status);
  }
  if (count == 0) return "the CUDA runtime reports no device";
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) {
    return cudaGetErrorString(cudaGetLastError());
  }
  // The message outlives the call: the caller copies it into its exception.
  static std::string problem;
  problem = mpitron::kernels::cuda_capability_problem(major, minor);
  return problem.empty() ? nullptr : problem.c_str();
}

mpitron::kernels::Backend* mpitron_cuda_module_backend() noexcept {
  static mpitron::kernels::CudaBackend instance;
  return &instance;
}
