// Chooses the backend of a device; the only place that decides whether CUDA exists.
#include "kernels/backend.h"

#include <stdexcept>

#include "kernels/cuda_module.h"

namespace mpitron::kernels {

bool cuda_built() {
  return cuda_module_installed();
}

int cuda_device_count() {
  static const int count = cuda_built() ? cuda_driver_device_count() : 0;
  return count;
}

bool cuda_available() {
  return cuda_device_count() > 0;
}

Backend& backend(Device device) {
  if (device == Device::cpu) return cpu_backend();
  if (!cuda_built()) {
    throw std::runtime_error(
        "kernels: a cuda buffer was requested but mpitron was built without CUDA (no CUDA "
        "module beside the kernels library)");
  }
  if (!cuda_available()) throw std::runtime_error("kernels: no CUDA device is visible");
  return cuda_module_backend();
}

}  // namespace mpitron::kernels
