// The floor of a job's start-up: an MPI program that starts MPI as mpitron does
// (MPI_Init_thread, MPI_THREAD_FUNNELED) and ends it, doing nothing between. Beside
// `mpirun -np 4 build/mpitron validate` it shows what mpitron adds to a launch
// (docs/performance.md, "Start-up").
#include <mpi.h>

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return 1;
  return MPI_Finalize() == MPI_SUCCESS ? 0 : 1;
}
