#include "comm/guard.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

#include "comm/errors.h"

namespace mpitron::comm {

std::string error_line(int rank, std::string_view message) {
  return "rank " + std::to_string(rank) + ": error: " + std::string(message);
}

void abort_job(const std::string& line, int code) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  end_job(code);
}

void end_job(int code) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

int run_guarded(const Communicator& world, const std::function<int()>& body) {
  try {
    return body();
  } catch (const ConfigError& error) {
    std::fprintf(stderr, "%s\n", error_line(world.world_rank(), error.what()).c_str());
    std::fflush(stderr);
    return kConfigErrorExitCode;
  } catch (const std::bad_alloc&) {
    abort_job(error_line(world.world_rank(),
                         "out of memory: the model or batch does not fit in this rank's memory"),
              kErrorExitCode);
  } catch (const std::exception& error) {
    abort_job(error_line(world.world_rank(), error.what()), kErrorExitCode);
  } catch (...) {
    abort_job(error_line(world.world_rank(), "unknown exception"), kErrorExitCode);
  }
}

}  // namespace mpitron::comm
