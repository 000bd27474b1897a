// `mpitron --version`: the version and how this binary was built.
#pragma once

#include <string>

namespace mpitron::app {

/// Several lines: "mpitron <version>", the CUDA backend (built, with the toolkit version and GPU
/// architectures, or not built), the CPU vector extensions the kernels were compiled for, and the
/// MPI library's version string. Needs no MPI_Init.
std::string version_text();

}  // namespace mpitron::app
