#include "comm/environment.h"

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <exception>
#include <stdexcept>

#include "comm/errors.h"
#include "comm/guard.h"
#include "comm/mpi_progress.h"
#include "comm/stall_inspector.h"

namespace mpitron::comm {

namespace {

int g_world_rank = -1;  // for the terminate handler, which has no other way to learn it

[[noreturn]] void terminate_job() {
  std::string what = "std::terminate called without an active exception";
  if (std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& error) {
      what = std::string("uncaught exception: ") + error.what();
    } catch (...) {
      what = "uncaught exception of unknown type";
    }
  }
  abort_job(error_line(g_world_rank, what), kErrorExitCode);
}

bool query_mpi_cuda_support() {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

// This rank's position among the ranks sharing its node: {rank, size} of MPI_COMM_TYPE_SHARED.
NodeShare node_share() {
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  NodeShare share;
  int rc = MPI_Comm_rank(node, &share.rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(node, &share.size);
  MPI_Comm_free(&node);
  check_mpi(rc, "MPI_Comm_rank/size");
  return share;
}

}  // namespace

Environment::Environment(int& argc, char**& argv, double init_timeout_seconds) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) throw std::logic_error("comm::Environment: MPI is already initialized");
  int provided = MPI_THREAD_SINGLE;
  InitWatchdog watchdog(init_timeout_seconds);
  check_mpi(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  watchdog.disarm();
  check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    throw std::runtime_error("the MPI library does not provide MPI_THREAD_FUNNELED");
  }
  // Read now, while little memory is in use: where the library's own variable cannot be read,
  // MPI_T's initialisation peaks at about 4 MiB that its finalisation gives back, which would
  // otherwise add to the peak RSS of a training run.
  mpi_yields_when_idle();
  world_ = Communicator::make_world(MPI_COMM_WORLD, node_share(), query_mpi_cuda_support());
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &stall_comm_), "MPI_Comm_dup");
  set_stall_inspection_comm(stall_comm_);
  g_world_rank = world_.rank();
  std::set_terminate(terminate_job);
}

Environment::~Environment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  set_stall_inspection_comm(MPI_COMM_NULL);
  if (stall_comm_ != MPI_COMM_NULL) MPI_Comm_free(&stall_comm_);
  MPI_Finalize();
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown MPI library";
  std::string version(text, static_cast<std::size_t>(length));
  return version.substr(0, version.find_first_of("\r\n"));
}

}  // namespace mpitron::comm
