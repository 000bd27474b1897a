// Command-line options shared by every `mpitron` subcommand, and their resolution into a
// topology, a device and a logger.
#pragma once

#include <spdlog/logger.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "kernels/device.h"

namespace mpitron::app {

/// Flags every subcommand takes: --tp --pp --dp --device --comm --gemm --threads --timeout-seconds
/// --log-dir --filemode --seed --json, --init-timeout (listed for --help and parsing; main reads
/// it from argv before MPI starts, comm::resolve_init_timeout) and --comm-table (main installs
/// rank 0's table before the subcommand runs, comm_table_source).
struct CommonOptions {
  std::optional<int> tp, pp, dp;
  std::optional<int> cp;         ///< --cp, where add_context_parallel_options registered it
  std::string cp_comm = "ring";  ///< --cp-comm: ring or all-gather
  std::string device = "auto";
  std::string comm_mode = "auto";
  std::string gemm;            ///< auto, eigen, blas or mpitron; empty: MPITRON_GEMM, else auto
  std::optional<int> threads;  ///< CPU threads per rank; unset: MPITRON_CPU_THREADS, else 1
  double timeout_seconds = 120.0;
  std::string log_dir = ".";
  std::string filemode = "a";
  std::uint64_t seed = 0;
  std::string json;
  std::string comm_table;  ///< empty: MPITRON_COMM_TABLE, else the built-in rule
};

/// Where the algorithm table of a run comes from (comm/algorithm_table.h): the --comm-table of
/// the subcommand that `app` parsed, else the MPITRON_COMM_TABLE environment variable
/// (`from_variable`); an empty path when neither is given (the built-in rule).
struct CommTableSource {
  std::string path;
  bool from_variable = false;
};
CommTableSource comm_table_source(const CLI::App& app);

/// Registers the common flags on `command`.
void add_common_options(CLI::App& command, CommonOptions& options);

/// Registers the common flags except the topology ones (--tp --pp --dp), for subcommands that
/// have no model.
void add_run_options(CLI::App& command, CommonOptions& options);

/// A CLI11 check that an option's value is a finite number >= `minimum`; otherwise parsing fails
/// with e.g. "--peak-gflops: must be a finite number >= 0, got inf" (CLI11's own range checks
/// print the whole range of a double).
CLI::Validator at_least(double minimum);

/// A CLI11 check that an option's value is an integer in [minimum, maximum], written in decimal;
/// otherwise parsing fails with e.g. "--max-bytes: must be an integer in [4, 268435456], got -1"
/// (CLI11 would wrap a negative value, or saturate a large one, into an unsigned option).
CLI::Validator integer_in(std::int64_t minimum, std::uint64_t maximum);

/// Registers the boolean flag `names` (CLI11's form, e.g. "-r,--recompute") into `value`. Given a
/// value (--bf16=false), the flag takes only true, false, on, off, yes, no, 1 or 0 (any case);
/// anything else fails parsing with e.g. "--bf16: must be true or false (or on/off, yes/no, 1/0),
/// got 2" (CLI11 alone reads any integer: 2 as true, -1 as false). Throws std::logic_error for a
/// negated name ("!--no-x"), whose value CLI11 inverts before any check sees it: give the
/// negation a switch of its own.
CLI::Option* add_switch(CLI::App& command, const std::string& names, bool& value,
                        const std::string& help);

/// The largest value of a size flag (elements, tokens, sequences, layers, steps, ...): 2^31 - 1.
/// A tensor holds at most 2^31 elements, so no larger size is usable, and a product of two sizes
/// then stays far inside int64 (products of more are checked where they are formed).
inline constexpr std::int64_t kMaxSize = 2147483647;

/// A CLI11 check that an integer option is at most kMaxSize; smaller values, negative ones
/// included, are left to the option's own checks. Otherwise parsing fails with e.g. "--hidden:
/// must be at most 2147483647, got 4611686018427387904", before any product of it can overflow.
CLI::Validator size_at_most_max();

/// Adds the integer size option `flag` (e.g. "--hidden") to `command`, its default shown in
/// --help and checked by size_at_most_max; returns it for further checks.
template <class T>
CLI::Option* add_size_option(CLI::App& command, const std::string& flag, T& value,
                             const std::string& help) {
  return command.add_option(flag, value, help)->capture_default_str()->check(size_at_most_max());
}

/// The (tp, pp, dp) degrees, and the context-parallel degree cp.
struct ParallelSizes {
  int tp = 1, pp = 1, dp = 1, cp = 1;
};

/// Resolves the degrees. cp is --cp, or 1. The others fill the world / cp ranks that remain:
/// when --tp, --pp and --dp are all omitted, a remainder divisible by 4 gives (2, 2, rest/4), an
/// even one (2, 1, rest/2), otherwise (1, 1, rest); when --dp is omitted but --tp or --pp is
/// given, the omitted one of those is 1 and dp = world / (tp*pp*cp) (Megatron-LM's rule); when
/// --dp is given, an omitted --tp or --pp is 1. Throws comm::ConfigError when a degree is < 1,
/// when the world is not divisible by cp ("world size 4 is not divisible by cp 3") or by tp*pp
/// (e.g. "world size 4 is not divisible by tp*pp = 3 (tp 3, pp 1, --dp omitted)"; with cp
/// "tp*cp*pp"), or when the product is not the world size (e.g. "tp*pp*dp = 2*2*2 = 8, but the
/// world size is 4"; with cp > 1 "tp*cp*pp*dp = 2*2*2*1 = 8, ...").
ParallelSizes resolve_parallel_sizes(const CommonOptions& options, int world_size);

/// Resolves --device: auto picks cuda when a device is visible, else cpu; cpu probes nothing, so
/// no CUDA library is mapped. For cuda it loads the CUDA module. Throws comm::ConfigError when
/// cuda is asked for without a device, when more than one GPU is visible (every rank of a
/// workstation computes on GPU 0: set CUDA_VISIBLE_DEVICES=0), or when the module cannot use the
/// device (e.g. "--device auto: kernels: the CUDA runtime cannot use a device: GPU 0 has compute
/// capability 7.5; mpitron's CUDA kernels and bfloat16 need 8.0 or above").
kernels::Device resolve_device(const std::string& device);

/// "cpu (blas GEMM, 1 thread)" for the CPU (the provider that runs `dtype`'s products,
/// kernels::gemm_provider_for, and cpu_threads(); beyond one thread also how idle threads wait:
/// "cpu (mpitron GEMM, 2 threads; idle threads spin 50 us, then sleep (2 threads x 1 rank on 2
/// CPUs))", openmp_wait.h), "cuda" for CUDA: how the start-up lines of train, validate and bench
/// name the device.
std::string device_text(kernels::Device device, kernels::DType dtype);

/// The GEMM provider the run asks for, as written: --gemm, else MPITRON_GEMM, else "auto" (not
/// checked; prepare_run rejects an unknown name).
std::string requested_gemm(const CommonOptions& options);

/// Whether this rank's run asks world rank 0 to resolve `--gemm auto` (agree_auto_gemm_provider):
/// requested_gemm is "auto", or `even_if_pinned` (bench gemm reports auto's choice whatever
/// MPITRON_GEMM pins), and --device is not cuda. Applies --threads (or reads
/// MPITRON_CPU_THREADS) first, so that auto is measured at the run's thread count; false when the
/// count is unusable (prepare_run then rejects it).
bool wants_auto_gemm(const CommonOptions& options, bool even_if_pinned = false);

/// Everything a subcommand sets up before its first collective, on this rank, without
/// communicating: applies --timeout-seconds and --comm to the world communicator family, --gemm
/// and --threads to the CPU kernels, checks
/// on rank 0 that the --json file can be written (opening it for appending creates it), and
/// returns a logger writing to `<log-dir>/rank_<rank>.log` (appending or truncating per
/// --filemode) and to the console with a "[rank N]" prefix (debug lines such as shapes go to the
/// file only; the console shows rank 0's info lines on stdout and every rank's warnings on
/// stderr). The log file's
/// first line records this rank's placement (comm::placement_text: host, pid, local rank, CPUs,
/// GPU); a rank whose threads outnumber its CPUs warns (cpu_mask_warning). Throws
/// comm::ConfigError on a timeout outside (0, 1e6] s, an unusable --comm mode, an unusable
/// --gemm or MPITRON_GEMM, an MPITRON_CPU_THREADS that is not a count, more than one thread in a
/// build without OpenMP, an unwritable --json file
/// or a log file that cannot be opened.
std::shared_ptr<spdlog::logger> prepare_run(const CommonOptions& options,
                                            comm::Communicator& world);

/// Activates the test-only fault named `name` (nn::parse_fault's spellings, "none" for none).
/// Throws comm::ConfigError for an unknown name.
void inject_fault(const std::string& name);

/// Writes `report` to `path` (replacing it) when `append` is false, else appends it as one line.
/// Throws std::runtime_error naming the path when the write fails.
void write_json(const std::string& path, const nlohmann::json& report, bool append = false);

}  // namespace mpitron::app
