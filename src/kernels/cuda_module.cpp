// Finds, probes and loads the CUDA module (cuda_module.h).
#include "kernels/cuda_module.h"

#include <dlfcn.h>

#include <atomic>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace mpitron::kernels {
namespace {

std::atomic<bool> module_loaded{false};

// The module's path: the directory this library was loaded from, plus the module's file name.
const std::string& module_path() {
  static const std::string path = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&cuda_module_installed), &info) == 0 ||
        info.dli_fname == nullptr) {
      return std::string();
    }
    return (std::filesystem::path(info.dli_fname).parent_path() / MPITRON_CUDA_MODULE_FILE)
        .string();
  }();
  return path;
}

template <class F>
F symbol(void* library, const char* name) {
  return reinterpret_cast<F>(dlsym(library, name));
}

Backend* load_module() {
  const std::string& path = module_path();
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    throw std::runtime_error("kernels: cannot load the CUDA module: " + std::string(dlerror()));
  }
  const auto check =
      symbol<decltype(&mpitron_cuda_module_check)>(library, "mpitron_cuda_module_check");
  const auto get =
      symbol<decltype(&mpitron_cuda_module_backend)>(library, "mpitron_cuda_module_backend");
  if (check == nullptr || get == nullptr) {
    throw std::runtime_error("kernels: " + path + " is not an mpitron CUDA module");
  }
  if (const char* error = check()) {
    throw std::runtime_error(std::string("kernels: the CUDA runtime cannot use a device: ") +
                             error);
  }
  return get();
}

}  // namespace

bool cuda_module_installed() {
  static const bool installed = [] {
    std::error_code error;
    return !module_path().empty() && std::filesystem::exists(module_path(), error);
  }();
  return installed;
}

std::string cuda_capability_problem(int major, int minor) {
  if (major >= kMinCudaCapabilityMajor) return "";
  return "GPU 0 has compute capability " + std::to_string(major) + "." + std::to_string(minor) +
         "; mpitron's CUDA kernels and bfloat16 need " + std::to_string(kMinCudaCapabilityMajor) +
         ".0 or above";
}

int cuda_driver_device_count() noexcept {
  // The driver API's types, as plain C: CUresult is an int enum, 0 is CUDA_SUCCESS.
  using Init = int (*)(unsigned int flags);
  using DeviceGetCount = int (*)(int* count);
  // The library stays loaded: when a device is found, the CUDA runtime maps it again anyway.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) return 0;
  const auto init = symbol<Init>(driver, "cuInit");
  const auto device_get_count = symbol<DeviceGetCount>(driver, "cuDeviceGetCount");
  int count = 0;
  if (init == nullptr || device_get_count == nullptr || init(0) != 0 ||
      device_get_count(&count) != 0) {
    return 0;
  }
  return count;
}

Backend& cuda_module_backend() {
  static Backend* const instance = [] {
    Backend* loaded = load_module();
    module_loaded.store(true);
    return loaded;
  }();
  return *instance;
}

bool cuda_module_loaded() noexcept {
  return module_loaded.load();
}

}  // namespace mpitron::kernels
