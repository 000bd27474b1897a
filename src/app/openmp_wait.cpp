// Passive waiting for the CPU kernels' OpenMP threads, unless the user chose a policy. GNU
// OpenMP's default (OMP_WAIT_POLICY unset) spins for about 300,000 iterations before a thread
// that waits for work sleeps; ranks that share cores (more ranks x threads than cores) then burn
// the time their neighbours need. libgomp reads the variable once, in its own initializer, so
// it is set here from the executable's .preinit_array, which runs before any shared library's
// initializer. An explicit OMP_WAIT_POLICY (or GOMP_SPINCOUNT) in the environment wins.
#include <cstdlib>

namespace {

void passive_openmp_waiting(int /*argc*/, char** /*argv*/, char** /*envp*/) {
  setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
}

}  // namespace

__attribute__((section(".preinit_array"),
               used)) static void (*preinit_passive_openmp)(int, char**,
                                                            char**) = passive_openmp_waiting;
