// The CUDA backend: cudaMalloc'd device memory, cudaMallocHost'd (pinned) staging memory, and
// the kernels of this folder. Everything runs on the default stream of the current device.
#include "kernels/cuda/check.h"
#include "kernels/cuda/kernels.h"
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

Backend& cuda_backend() {
  static CudaBackend instance;
  return instance;
}

int cuda_runtime_device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());  // e.g. cudaErrorNoDevice, cudaErrorInsufficientDriver
    return 0;
  }
  return count;
}

}  // namespace mpitron::kernels
