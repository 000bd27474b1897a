// How the CPU kernels' idle OpenMP threads wait between parallel loops (openmp_wait.cpp chooses
// it at start; openmp_wait_rule.h has the rule).
#pragma once

#include <optional>
#include <string>

namespace mpitron::app {

/// What the start-up lines print after the thread count: mpitron's choice ("idle threads spin
/// 50 us, then sleep (2 threads x 1 rank on 2 CPUs)" or "idle threads sleep (...)"), else the
/// user's OMP_WAIT_POLICY or GOMP_SPINCOUNT ("OMP_WAIT_POLICY=active"), else "GNU OpenMP's
/// default wait" (the re-execution failed, or no OpenMP region was expected at start).
std::string openmp_wait_text();

/// A one-line warning when `threads` threads per rank outnumber the CPUs this process may run on
/// (its affinity mask: Open MPI binds each of up to 2 ranks to one core by default), so that its
/// threads take turns on them; std::nullopt otherwise.
std::optional<std::string> cpu_mask_warning(int threads);

}  // namespace mpitron::app
