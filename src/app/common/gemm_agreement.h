// `--gemm auto` agreed across ranks: world rank 0 resolves auto's CPU GEMM provider (measured, or
// read from its cache file: kernels/cpu/gemm_auto.h) and every rank installs rank 0's, because the
// replicas of a run must compute the same bits. Measuring on every rank instead would let timing
// noise (other ranks on the same cores) pick different providers on different ranks; the cache
// file alone would not settle that either, as the first ranks of a new machine all measure, and
// the ranks of several nodes read different caches.
#pragma once

#include <string>

#include "comm/communicator.h"
#include "kernels/cpu/gemm_auto.h"

namespace mpitron::app {

/// Collective over `world` (every rank calls it, whatever it asked for): when `resolve` is true
/// on world rank 0 (its run asks for --gemm auto on the CPU; the other ranks' `resolve` is not
/// read), rank 0 resolves auto's provider at its cpu_threads()
/// (kernels::resolve_auto_gemm_provider) and broadcasts it, and every rank installs it for that
/// thread count (kernels::set_auto_gemm_provider), so that parse_gemm_provider("auto") names the
/// same provider on every rank. Returns rank 0's choice (on the other ranks without the rates);
/// when rank 0 resolved nothing, installs nothing and returns agreed_auto_gemm_choice() (a
/// default GemmChoice where MPITRON_CPU_THREADS is unusable: prepare_run reports that). Throws
/// comm::ConfigError on every rank when rank 0 could not resolve (a malformed MPITRON_GEMM_RATES):
/// rank 0's names the cause, the others point to rank 0's error line.
kernels::GemmChoice agree_auto_gemm_provider(const comm::Communicator& world, bool resolve);

/// What the last agree_auto_gemm_provider returned on this rank; before any, the fixed rule's
/// provider at cpu_threads() (source `fixed`, no rates).
kernels::GemmChoice agreed_auto_gemm_choice();

/// The choice as one line for logs and `bench gemm`, e.g. "mpitron (measured at 1 thread:
/// eigen 40.1, blas 55.2, mpitron 60.3 GFLOP/s)", "eigen (cached at 2 threads: ...)" or
/// "blas (fixed rule at 1 thread)".
std::string gemm_choice_text(const kernels::GemmChoice& choice);

}  // namespace mpitron::app
