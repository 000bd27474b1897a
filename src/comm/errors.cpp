#include "comm/errors.h"

#include <mpi.h>

namespace mpitron::comm {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS || length <= 0) {
    return "unknown MPI error " + std::to_string(code);
  }
  return std::string(text, static_cast<std::size_t>(length));
}

MpiError::MpiError(std::string_view call, int code)
    : std::runtime_error(std::string(call) + " failed: " + mpi_error_string(code)), code_(code) {}

void check_mpi(int code, std::string_view call) {
  if (code != MPI_SUCCESS) throw MpiError(call, code);
}

}  // namespace mpitron::comm
