// How the CPU kernels' idle OpenMP threads wait between parallel loops (openmp_wait.cpp chooses
// it before main; openmp_wait_rule.h has the rule).
#pragma once

#include <optional>
#include <string>

namespace mpitron::kernels {

/// Chooses how idle OpenMP threads wait for the thread count `threads_argument` (the text of
/// the command's last --threads, or nullptr) or else MPITRON_CPU_THREADS in `envp` asks for,
/// and, when that is more than 1 and neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set,
/// executes the program again at once with `argv` and `envp` plus the choice (libgomp reads
/// the variables only in its initializer). Returns where it keeps GNU OpenMP's default. Runs
/// before main, from the executable's .preinit_array: it allocates nothing but the new
/// environment (malloc) and raises no error (an unreadable count is 1; the parser reports it).
void choose_openmp_wait(const char* threads_argument, char** argv, char** envp);

/// What the start-up lines print after the thread count: mpitron's choice ("idle threads spin
/// 50 us, then sleep (2 threads x 1 rank on 2 CPUs)" or "idle threads sleep (...)"), else the
/// user's OMP_WAIT_POLICY or GOMP_SPINCOUNT ("OMP_WAIT_POLICY=active"), else "GNU OpenMP's
/// default wait" (the re-execution failed, or no OpenMP region was expected at start).
std::string openmp_wait_text();

/// A one-line warning when `threads` threads per rank outnumber the CPUs this process may run on
/// (its affinity mask when choose_openmp_wait ran: Open MPI binds each of up to 2 ranks to one
/// core by default), so that its threads take turns on them; std::nullopt otherwise.
std::optional<std::string> cpu_mask_warning(int threads);

}  // namespace mpitron::kernels
