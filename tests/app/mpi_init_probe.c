/* Test helper, preloaded into a program with LD_PRELOAD: every call that starts MPI (MPI_Init,
 * MPI_Init_thread) prints "mpi-init-probe: PROGRAM: <call> called" to stderr and then goes on to
 * the MPI library, so the program runs as it would without the probe. A command that only prints
 * (help, the version, a parse error) must leave no such line. The probe needs no MPI header: it
 * only passes the arguments on. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

/* MPI_ERR_OTHER differs between MPI libraries; any non-zero value is an error to the caller. */
enum { kNoMpiLibrary = 1 };

static void report(const char* call) {
  fprintf(stderr, "mpi-init-probe: %s: %s called\n", program_invocation_short_name, call);
  fflush(stderr);
}

int MPI_Init(int* argc, char*** argv) {
  report("MPI_Init");
  int (*next)(int*, char***) = (int (*)(int*, char***))dlsym(RTLD_NEXT, "MPI_Init");
  return next != NULL ? next(argc, argv) : kNoMpiLibrary;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  report("MPI_Init_thread");
  int (*next)(int*, char***, int, int*) =
      (int (*)(int*, char***, int, int*))dlsym(RTLD_NEXT, "MPI_Init_thread");
  return next != NULL ? next(argc, argv, required, provided) : kNoMpiLibrary;
}
