// Internal: error checks for CUDA runtime and cuBLAS calls that name the call, file and line.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace mpitron::kernels::cuda {

inline void check(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA error: ") + cudaGetErrorString(status) + " in " +
                             call + " at " + file + ":" + std::to_string(line));
  }
}

inline void check(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuBLAS error: ") + cublasGetStatusString(status) +
                             " in " + call + " at " + file + ":" + std::to_string(line));
  }
}

}  // namespace mpitron::kernels::cuda

/// Throws std::runtime_error naming the call, file and line when a CUDA runtime or cuBLAS call
/// does not return success.
#define MPITRON_CUDA_CHECK(call) ::mpitron::kernels::cuda::check((call), #call, __FILE__, __LINE__)
