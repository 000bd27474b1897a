// The CPU thread count: the OpenMP threads of the CPU kernels (parallel.h) and of the GEMM's
// tiles (gemm.cpp), 1 unless MPITRON_CPU_THREADS or set_cpu_threads say otherwise. Eigen's and
// OpenBLAS's own threads stay at 1: the kernels split the work themselves, by rules that keep
// every result's bits independent of the count. Without OpenMP every kernel runs on one thread.
#include <Eigen/Core>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/cpu/gemm.h"
#include "kernels/ops.h"

namespace mpitron::kernels {
namespace {

int parse_env_threads() {
  const char* text = std::getenv("MPITRON_CPU_THREADS");
  if (text == nullptr || *text == '\0') return 1;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 1 || value > kMaxCpuThreads) {
    throw std::invalid_argument(std::string("MPITRON_CPU_THREADS must be an integer in [1, ") +
                                std::to_string(kMaxCpuThreads) + "], not '" + text + "'");
  }
  return static_cast<int>(value);
}

// The count, 0 until set_cpu_threads or the first cpu_threads() (which reads the variable, so
// that a bad value is an error only where the variable is used, not when --threads overrides
// it). Eigen's and OpenBLAS's own threads are set to 1 before either returns.
int& thread_count() {
  static int count = [] {
    Eigen::setNbThreads(1);
    cpu::set_blas_threads(1);
    return 0;
  }();
  return count;
}

}  // namespace

void set_cpu_threads(int threads) {
  if (threads < 1 || threads > kMaxCpuThreads) {
    throw std::invalid_argument("kernels::set_cpu_threads: threads must be in [1, " +
                                std::to_string(kMaxCpuThreads) + "], not " +
                                std::to_string(threads));
  }
  thread_count() = threads;
}

int cpu_threads() {
  int& count = thread_count();
  if (count == 0) count = parse_env_threads();
  return count;
}

bool cpu_openmp_available() {
#ifdef _OPENMP
  return true;
#else
  return false;
#endif
}

}  // namespace mpitron::kernels
