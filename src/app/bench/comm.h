// `mpitron bench comm`: all-reduce, all-gather, reduce-scatter and send/recv through mpitron's
// comm layer beside the plain MPI calls on the same buffers, over a range of message sizes;
// prints latency (us) and bandwidth (GB/s) per size and, with --json, appends one JSON line.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "app/bench/comm_ops.h"
#include "app/common/options.h"

namespace mpitron::app {

/// The largest --max-bytes, 256 MiB: every rank holds four buffers of up to that size while it
/// checks that both paths agree.
inline constexpr std::size_t kMaxCommBytes = std::size_t{256} << 20;

/// The file `bench comm --tune-table` writes when it is given no name.
inline constexpr const char* kDefaultCommTable = "comm_table.json";

struct BenchCommOptions {
  CommonOptions common;
  std::size_t min_bytes = std::size_t{4} << 10;
  std::size_t max_bytes = std::size_t{64} << 20;
  /// float32 or bfloat16 buffers (bfloat16: sums by comm::bf16_mpi_op on both paths).
  std::string dtype = "float32";
  /// Most timed calls per size and path (comm_iterations).
  int max_iterations = 1000;
  /// The operations to time, by to_string(CommOp) name, in this order; all four by default.
  std::vector<std::string> ops = comm_op_names();
  /// --tune-table's file ("": kDefaultCommTable): measure every algorithm and write a comm
  /// table instead of the comparison. Not `--tune`: Open MPI's mpirun takes `--tune FILE` from
  /// anywhere on its command line, the program's arguments included, as its own MCA parameter
  /// file.
  std::optional<std::string> tune;
};

/// Adds the `comm` subcommand and its flags (--min-bytes --max-bytes --dtype --max-iterations --ops
/// and the common ones except --tp --pp --dp) to `bench`.
CLI::App& add_bench_comm_command(CLI::App& bench, BenchCommOptions& options);

/// The error for options of `bench` itself (its MLP step's, e.g. --recompute, --hidden, --tp)
/// given before `subcommand` ("comm", "gemm", "gpt" or "schedule"), which CLI11 accepts and the
/// subcommand would ignore: "bench comm does not take --X (...)", naming the first; empty when none
/// was given. Call after parsing.
std::string bench_step_options_given(const CLI::App& bench, const std::string& subcommand);

/// Times every operation of options.ops at sizes min_bytes, 4*min_bytes, ... up to max_bytes on
/// every rank of `world`, through comm and through plain MPI, after one untimed run of each whose
/// results must be identical (inputs are small integers, so sums are exact). The calls run in up to
/// 5 rounds, each timing comm then plain MPI; a round's time per call is the slowest rank's, and
/// each path reports its median round ("iterations": calls per path). Rank 0 prints the table and,
/// with --json, appends
/// {"tool", "bench": "comm", "world_size", "device", "dtype", "results": [{"op", "bytes",
/// "iterations", "mpitron_us", "mpi_us", "mpitron_gbps", "mpi_gbps", "mpitron_bus_gbps",
/// "mpi_bus_gbps"}]} (GB/s = 1e9 bytes/s of the reported size; bus GB/s per bench_comm_ops.h).
/// Returns 1 when a result differs, else 0. Throws comm::ConfigError when min_bytes < 4 or
/// max_bytes < min_bytes, and for --tune-table with --device cuda or --dtype bfloat16.
int run_bench_comm(const BenchCommOptions& options, comm::Communicator world);

}  // namespace mpitron::app
