// What `--gemm auto` means: the CPU GEMM provider that ran fastest here, measured on a few
// float32 products at the current thread count, remembered in a cache file per CPU, build and
// thread count. The rule (rates -> provider) is a pure function; the measurement, the cache and
// the environment that steers them are separate so that each can be tested alone. No MPI: the
// mpitron command makes world rank 0 resolve the choice and hands it to every rank
// (app/common/gemm_agreement.h), because replicas must compute the same bits.
#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace mpitron::kernels {

/// One provider's measured speed: GFLOP/s (2 m n k / seconds / 1e9) over auto's products.
struct GemmRate {
  GemmProvider provider = GemmProvider::eigen;
  double gflops = 0.0;
};

/// How auto's provider was found: measured now, read from the cache file, given by
/// MPITRON_GEMM_RATES, or the fixed rule (fixed_gemm_provider) where nothing could be timed.
enum class GemmChoiceSource { measured, cached, given, fixed };

/// "measured", "cached", "given" or "fixed".
std::string to_string(GemmChoiceSource source);

/// Auto's provider with the rates it was chosen from (in eigen, blas, mpitron order; empty for
/// the fixed rule), the thread count they were measured at and where the choice came from.
struct GemmChoice {
  GemmProvider provider = GemmProvider::eigen;
  std::vector<GemmRate> rates;
  int threads = 1;
  GemmChoiceSource source = GemmChoiceSource::fixed;
};

/// Rates within this share of the best are a tie, settled by kGemmPreference.
inline constexpr double kGemmTieShare = 0.03;

/// The order ties are settled in: mpitron's own GEMM first (the same code, so the same bits, on
/// every machine of one instruction set, and cut by columns at more threads), then OpenBLAS, then
/// Eigen.
inline constexpr GemmProvider kGemmPreference[] = {GemmProvider::mpitron, GemmProvider::blas,
                                                   GemmProvider::eigen};

/// The rule of auto: among `rates` (any order, each provider at most once), those within
/// kGemmTieShare of the highest rate, and of them the first in kGemmPreference. The choice is
/// therefore never more than 3 % slower than the best measured (the bound is 10 %).
/// Throws std::invalid_argument when `rates` is empty, names a provider twice or holds a rate that
/// is not a finite number above 0.
GemmProvider choose_gemm_provider(std::span<const GemmRate> rates);

/// Times every provider of this build (eigen, blas when gemm_blas_available, mpitron) at
/// cpu_threads() on three float32 products of a GPT-2 MLP scaled down to 128 tokens and 384
/// features ([128, 1536] x 384 forward, [128, 384] x 1536 input gradient, [1536, 384] x 128
/// weight gradient: 0.45 GFLOP a round), in rounds that visit the providers in turn until
/// `seconds` have passed (at least three rounds; the first warms up and is not counted). A
/// provider's rate is the products' FLOPs over the sum of each product's fastest call, each call
/// timed by the calling thread's CPU time at one thread (processes sharing the core do not
/// count) and by the wall clock at more. Restores
/// the current provider. About 0.1-0.2 s at `seconds` = 0.1 on one Zen 3 core.
std::vector<GemmRate> measure_gemm_providers(double seconds = 0.1);

/// What a cached choice is valid for, on one line: the CPU's model name (/proc/cpuinfo), this
/// build (the kernels library's path, size and modification time, and its vector extensions),
/// cpu_threads(), OpenBLAS's kernel (gemm_blas_kernel) and the OPENBLAS_CORETYPE and
/// OPENBLAS_L2_SIZE variables, which change OpenBLAS's kernels and blocking.
std::string gemm_cache_key();

/// The cache file of `key`: `gemm-auto-<hash of key>.txt` in the folder MPITRON_GEMM_CACHE names,
/// else $XDG_CACHE_HOME/mpitron, else $HOME/.cache/mpitron; std::nullopt when
/// MPITRON_GEMM_CACHE is "off" or no folder is known (then auto measures at every start).
std::optional<std::filesystem::path> gemm_cache_file(const std::string& key);

/// The choice stored in `file` for `key`; std::nullopt when the file is missing, unreadable,
/// malformed, written for another key, or names a provider this build lacks (a corrupt file is
/// a cache miss, never an error).
std::optional<GemmChoice> read_gemm_cache(const std::filesystem::path& file,
                                          const std::string& key);

/// Stores `choice` for `key` in `file` unless a readable choice for `key` is already there (the
/// first writer wins, so concurrent processes that measured differently all end up reading one
/// choice). Written to a private temporary file in the same folder, then hard-linked into place
/// (atomically failing when the file exists) or, over an unreadable file, renamed over it; the
/// folder is created. Returns whether `choice` was stored; any failure (a read-only folder, a
/// full disk) returns false and leaves no temporary file.
bool write_gemm_cache(const std::filesystem::path& file, const std::string& key,
                      const GemmChoice& choice);

/// The rates "eigen=40,blas=55.5,mpitron=61" as MPITRON_GEMM_RATES gives them (comma-separated
/// provider=GFLOP/s); throws std::invalid_argument naming the text when it is malformed, names a
/// provider twice or a provider this build lacks. Meant for tests that need a given choice.
std::vector<GemmRate> parse_gemm_rates(const std::string& text);

/// Auto's provider at cpu_threads(), for the mpitron command's world rank 0: the rates of
/// MPITRON_GEMM_RATES when set (no cache), else the cache file's choice, else a measurement
/// (measure_gemm_providers) stored in the cache for the next start and replaced by the cache's
/// choice when another process stored one first. Throws std::invalid_argument for a malformed
/// MPITRON_GEMM_RATES ("MPITRON_GEMM_RATES: GEMM rates '...': ...").
GemmChoice resolve_auto_gemm_provider();

}  // namespace mpitron::kernels
