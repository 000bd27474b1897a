// Chooses the backend of a device; the only place that decides whether CUDA exists.
#include "kernels/backend.h"

#include <stdexcept>

namespace mpitron::kernels {

bool cuda_built() {
  return MPITRON_HAVE_CUDA != 0;
}

int cuda_device_count() {
#if MPITRON_HAVE_CUDA
  static const int count = cuda_runtime_device_count();
  return count;
#else
  return 0;
#endif
}

bool cuda_available() {
  return cuda_device_count() > 0;
}

Backend& backend(Device device) {
  if (device == Device::cpu) return cpu_backend();
#if MPITRON_HAVE_CUDA
  if (!cuda_available()) throw std::runtime_error("kernels: no CUDA device is visible");
  return cuda_backend();
#else
  throw std::runtime_error(
      "kernels: a cuda buffer was requested but mpitron was built without CUDA");
#endif
}

}  // namespace mpitron::kernels
