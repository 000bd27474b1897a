// The exceptions the communication layer raises, and the translation of MPI error codes.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace mpitron::comm {

/// An error that every rank detects identically from the same inputs (topology sizes that do not
/// fit the world, configurations that differ between ranks). Because no rank is left waiting,
/// `run_guarded` reports it and finalizes MPI cleanly instead of aborting.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An MPI call returned an error code (communicators use MPI_ERRORS_RETURN). The message is
/// "<call> failed: <MPI error string>".
class MpiError : public std::runtime_error {
 public:
  /// `call` names the MPI function (e.g. "MPI_Isend"); `code` is its return value.
  MpiError(std::string_view call, int code);

  /// The MPI error code the call returned.
  int code() const { return code_; }

 private:
  int code_;
};

/// Returns when `code` is MPI_SUCCESS; otherwise throws MpiError naming `call` and carrying the
/// string MPI_Error_string gives for `code`.
void check_mpi(int code, std::string_view call);

/// The text MPI_Error_string gives for `code` (or "unknown MPI error <code>").
std::string mpi_error_string(int code);

}  // namespace mpitron::comm
