// MPI start and finish for one process, and the world communicator.
#pragma once

#include <mpi.h>

#include <string>

#include "comm/communicator.h"
#include "comm/init_watchdog.h"

namespace mpitron::comm {

/// Initializes MPI for the lifetime of the object (one per process).
///
/// The constructor calls MPI_Init_thread requesting MPI_THREAD_FUNNELED (only the main thread
/// calls MPI), sets MPI_ERRORS_RETURN on MPI_COMM_WORLD so failures become MpiError exceptions,
/// counts the ranks sharing this node (MPI_Comm_split_type, for the automatic CUDA transfer
/// mode), queries CUDA support (MPIX_Query_cuda_support where <mpi-ext.h> offers it), reads
/// mpi_yields_when_idle (mpi_progress.h) once, duplicates MPI_COMM_WORLD for the stall
/// inspector (stall_inspector.h) and installs a std::terminate handler that prints "rank N:
/// error: <what>" and aborts the whole job with kErrorExitCode, so an exception escaping on any
/// rank never leaves others waiting.
/// The destructor calls MPI_Finalize.
class Environment {
 public:
  /// Throws std::logic_error when MPI is already initialized, std::runtime_error when the
  /// library offers less than MPI_THREAD_FUNNELED, MpiError when an MPI call fails. An
  /// InitWatchdog (init_watchdog.h) ends the process when MPI_Init takes longer than
  /// `init_timeout_seconds`.
  Environment(int& argc, char**& argv, double init_timeout_seconds = kDefaultInitTimeoutSeconds);
  ~Environment();

  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  /// The handle on MPI_COMM_WORLD (settings such as the deadline are shared by its copies and
  /// by every communicator split from it).
  const Communicator& world() const { return world_; }
  Communicator& world() { return world_; }

 private:
  Communicator world_;
  MPI_Comm stall_comm_ = MPI_COMM_NULL;  ///< side channel of the stall inspector
};

/// The MPI library's version text (MPI_Get_library_version, which MPI allows before MPI_Init),
/// cut at its first line break, e.g. "Open MPI v4.1.6, package: Debian OpenMPI, ...".
std::string mpi_library_version();

}  // namespace mpitron::comm
