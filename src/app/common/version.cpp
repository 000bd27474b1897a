#include "app/common/version.h"

#include <fmt/format.h>

#include "comm/environment.h"
#include "kernels/build_info.h"
#include "kernels/device.h"
#include "kernels/ops.h"

namespace mpitron::app {

std::string version_text() {
  const std::string cuda = kernels::cuda_built()
                               ? fmt::format("built (CUDA {}, GPU architectures {})",
                                             MPITRON_CUDA_VERSION, MPITRON_CUDA_ARCHITECTURES)
                               : std::string("not built");
  const std::string gemm =
      kernels::gemm_blas_available()
          ? fmt::format(
                "auto = the fastest of eigen, blas (OpenBLAS, {} kernels), mpitron, "
                "measured at start-up",
                kernels::gemm_blas_kernel())
          : std::string(
                "auto = the fastest of eigen, mpitron (built without a BLAS), measured "
                "at start-up");
  return fmt::format("mpitron {}\nCUDA backend: {}\nCPU kernels: {}\nCPU GEMM: {}\nMPI library: {}",
                     MPITRON_VERSION, cuda, kernels::cpu_vector_extensions(), gemm,
                     comm::mpi_library_version());
}

}  // namespace mpitron::app
