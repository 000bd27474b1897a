#include "app/version.h"

#include <fmt/format.h>

#include "comm/environment.h"
#include "kernels/build_info.h"
#include "kernels/device.h"

namespace mpitron::app {

std::string version_text() {
  const std::string cuda = kernels::cuda_built()
                               ? fmt::format("built (CUDA {}, GPU architectures {})",
                                             MPITRON_CUDA_VERSION, MPITRON_CUDA_ARCHITECTURES)
                               : std::string("not built");
  return fmt::format("mpitron {}\nCUDA backend: {}\nCPU kernels: {}\nMPI library: {}",
                     MPITRON_VERSION, cuda, kernels::cpu_vector_extensions(),
                     comm::mpi_library_version());
}

}  // namespace mpitron::app
