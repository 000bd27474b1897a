// Internal: the CUDA backend as a separately built module (libmpitron_cuda.so beside
// libmpitron_kernels.so), loaded with dlopen on first use so that CPU runs never map the CUDA
// runtime, cuBLAS or the driver. This header is the whole contract between the two: the module
// (cuda/cuda_backend.cpp) defines the two extern "C" entry points, kernels (cuda_module.cpp)
// finds and calls them.
#pragma once

#include <string>

#include "kernels/backend.h"

/// The module is built with hidden visibility; only these entry points are exported.
#define MPITRON_CUDA_MODULE_EXPORT extern "C" __attribute__((visibility("default")))

/// Entry point of the module: nullptr when the CUDA runtime sees a device, else a message naming
/// the runtime's error (no device, driver too old for the runtime, ...). Never throws.
MPITRON_CUDA_MODULE_EXPORT const char* mpitron_cuda_module_check() noexcept;

/// Entry point of the module: its Backend, a process-lifetime singleton; call after a successful
/// check. Never throws.
MPITRON_CUDA_MODULE_EXPORT mpitron::kernels::Backend* mpitron_cuda_module_backend() noexcept;

namespace mpitron::kernels {

/// True when the module file exists beside the kernels library (mpitron was built with CUDA and
/// the module is installed). Loads nothing.
bool cuda_module_installed();

/// Number of devices the CUDA driver reports, probed through libcuda.so.1 with cuInit and
/// cuDeviceGetCount (no CUDA runtime); 0 when the driver library is absent or reports an error.
/// Maps libcuda.so.1 when it exists. Never throws.
int cuda_driver_device_count() noexcept;

/// The oldest GPU the module runs on: compute capability 8.0 (Ampere). Its kernels are built for
/// MPITRON_CUDA_ARCHITECTURES (8.0 and 9.0 by default), and bfloat16 (train --bf16: the
/// __nv_bfloat16 conversions, cuBLAS's CUDA_R_16BF products with float32 compute) needs 8.0.
inline constexpr int kMinCudaCapabilityMajor = 8;

/// Why a GPU of compute capability major.minor cannot run the module, on one line (e.g. "GPU 0
/// has compute capability 7.5; mpitron's CUDA kernels and bfloat16 need 8.0 or above"), or ""
/// when it can. Pure; the module's check calls it on device 0.
std::string cuda_capability_problem(int major, int minor);

/// The module's backend, loading the module on the first call. Throws std::runtime_error naming
/// the module path and the loader's or the CUDA runtime's message when it cannot be used.
Backend& cuda_module_backend();

/// True once cuda_module_backend() has succeeded, i.e. CUDA memory may exist in this process.
bool cuda_module_loaded() noexcept;

}  // namespace mpitron::kernels
