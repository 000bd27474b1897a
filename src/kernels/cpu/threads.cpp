// The CPU thread count: Eigen's GEMM threads, 1 unless MPITRON_CPU_THREADS or set_cpu_threads say
// otherwise (with OpenMP off, Eigen is single-threaded whatever the count).
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
  if (*end != '\0' || value < 1 || value > 4096) {
    throw std::invalid_argument(std::string("MPITRON_CPU_THREADS must be an integer >= 1, not '") +
                                text + "'");
  }
  return static_cast<int>(value);
}

int& thread_count() {
  static int count = [] {
    const int threads = parse_env_threads();
    Eigen::setNbThreads(threads);
    cpu::set_blas_threads(threads);
    return threads;
  }();
  return count;
}

}  // namespace

void set_cpu_threads(int threads) {
  if (threads < 1) {
    throw std::invalid_argument("kernels::set_cpu_threads: threads must be >= 1, not " +
                                std::to_string(threads));
  }
  thread_count() = threads;
  Eigen::setNbThreads(threads);
  cpu::set_blas_threads(threads);
}

int cpu_threads() {
  return thread_count();
}

}  // namespace mpitron::kernels
