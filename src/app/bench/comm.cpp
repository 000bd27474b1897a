#include "app/bench/comm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <vector>

#include "app/bench/comm_ops.h"
#include "app/bench/comm_tune.h"
#include "app/common/help.h"
#include "comm/agreement.h"
#include "comm/collectives.h"
#include "comm/configuration.h"
#include "comm/errors.h"
#include "comm/guard.h"
#include "comm/watchdog.h"
#include "nn/wording.h"

namespace mpitron::app {

CLI::App& add_bench_comm_command(CLI::App& bench, BenchCommOptions& options) {
  CLI::App& command = *bench.add_subcommand(
      "comm",
      "Time mpitron's all-reduce, all-gather, reduce-scatter and send/recv beside plain MPI");
  add_run_options(command, options.common);
  command.add_option("--min-bytes", options.min_bytes, "Smallest message size")
      ->check(integer_in(sizeof(float), kMaxCommBytes))
      ->capture_default_str();
  command
      .add_option("--max-bytes", options.max_bytes,
                  "Largest message size (sizes grow 4x; at most 256 MiB; all-gather and "
                  "reduce-scatter sizes round down to a multiple of ranks x element size, and "
                  "every size up to one element per rank)")
      ->check(integer_in(sizeof(float), kMaxCommBytes))
      ->capture_default_str();
  command.add_option("--dtype", options.dtype, "Buffer dtype: float32 or bfloat16")
      ->check(CLI::IsMember({"float32", "bfloat16"}))
      ->capture_default_str();
  command.add_option("--max-iterations", options.max_iterations, "Most timed calls per size")
      ->check(integer_in(1, std::numeric_limits<int>::max()))
      ->capture_default_str();
  command
      .add_option("--ops", options.ops,
                  "Operations to time, in this order (default: all-reduce, all-gather, "
                  "reduce-scatter, send/recv)")
      ->check(CLI::IsMember(comm_op_names()))
      ->delimiter(',')
      ->allow_extra_args(false)
      ->type_name("OP,...");
  command
      .add_option("--tune-table", options.tune,
                  "Time every algorithm and MPI's own collective per size and group size, and "
                  "write the fastest as a comm table (default FILE: comm_table.json)")
      ->expected(0, 1)
      ->type_name("[FILE]");
  add_example(command,
              "mpirun -np 4 mpitron bench comm --ops all-reduce,all-gather --max-bytes 16777216");
  return command;
}

std::string bench_step_options_given(const CLI::App& bench, const std::string& subcommand) {
  for (const CLI::Option* option : bench.get_options()) {
    if (option->count() > 0) {
      return fmt::format(
          "bench {0} does not take {1} (an option of bench's MLP step given before '{0}')",
          subcommand, option->get_name());
    }
  }
  return "";
}

namespace {

// Where and in which dtype the buffers live.
struct Payload {
  kernels::Device device = kernels::Device::cpu;
  kernels::DType dtype = kernels::DType::f32;
  std::size_t bytes(std::size_t n) const { return n * kernels::dtype_size(dtype); }
};

struct Timing {
  int iterations = 0;
  double mpitron_s = 0.0, mpi_s = 0.0;  // per iteration, slowest rank
  std::string algorithm;                // the one mpitron's path took
};

// `run()`, which makes `calls` plain blocking MPI calls of `op`. They have no deadline of their
// own, so a watchdog ends the job with one line when they take longer than the timeout per call
// (a rank stalled or died) instead of leaving it hanging.
template <class Run>
auto with_mpi_deadline(const comm::Communicator& world, CommOp op, std::size_t bytes, int calls,
                       Run&& run) {
  const double seconds = world.timeout() * calls;
  const comm::Watchdog watchdog(
      seconds,
      [rank = world.world_rank(), op, bytes, calls, seconds] {
        return comm::error_line(
            rank,
            fmt::format("bench comm: {} of plain MPI {} on {} did not complete within {:g} s "
                        "(--timeout-seconds per call): a rank stalled or died",
                        nn::counted(calls, "call"), to_string(op), size_text(bytes), seconds));
      },
      comm::kDeadlineExitCode);
  return run();
}

// One untimed run each way on fresh inputs; true when every rank got identical results.
bool results_match(CommOp op, const comm::Communicator& world, std::size_t n,
                   const Payload& payload) {
  CommBuffers through_comm =
      make_comm_buffers(op, n, world.size(), world.rank(), payload.device, payload.dtype);
  CommBuffers plain =
      make_comm_buffers(op, n, world.size(), world.rank(), payload.device, payload.dtype);
  run_mpitron(op, world, through_comm);
  with_mpi_deadline(world, op, payload.bytes(n), 1, [&] { run_mpi(op, world, plain); });
  const kernels::Buffer a = comm_result(op, through_comm).to(kernels::Device::cpu);
  const kernels::Buffer b = comm_result(op, plain).to(kernels::Device::cpu);
  const bool same = std::memcmp(a.data(), b.data(), a.bytes()) == 0;
  return comm::all_reduce_scalar(world, same ? 0.0 : 1.0, comm::ReduceOp::max) == 0.0;
}

Timing measure(CommOp op, const comm::Communicator& world, std::size_t n, int iterations,
               const Payload& payload) {
  CommBuffers buffers =
      make_comm_buffers(op, n, world.size(), world.rank(), payload.device, payload.dtype);
  run_mpitron(op, world, buffers);  // warm-up: staging workspaces, MPI connections
  with_mpi_deadline(world, op, payload.bytes(n), 1, [&] { run_mpi(op, world, buffers); });
  const int rounds = std::min(kCommRounds, iterations);
  const int per_round = iterations / rounds;
  std::vector<double> mpitron_s, mpi_s;
  for (int round = 0; round < rounds; ++round) {
    mpitron_s.push_back(time_calls(world, per_round, [&] { run_mpitron(op, world, buffers); }));
    mpi_s.push_back(with_mpi_deadline(world, op, payload.bytes(n), per_round, [&] {
      return time_calls(world, per_round, [&] { run_mpi(op, world, buffers); });
    }));
  }
  Timing timing;
  timing.algorithm = algorithm_taken(op, world, buffers);
  timing.iterations = rounds * per_round;
  timing.mpitron_s = median(mpitron_s);
  timing.mpi_s = median(mpi_s);
  if (op == CommOp::send_recv) {  // one run is a round trip: report one way
    timing.mpitron_s /= 2.0;
    timing.mpi_s /= 2.0;
  }
  return timing;
}

}  // namespace

int run_bench_comm(const BenchCommOptions& options, comm::Communicator world) {
  Payload payload;
  const std::string tune_path =
      options.tune && !options.tune->empty() ? *options.tune : std::string(kDefaultCommTable);
  comm::agree_on_configuration(world, [&] {
    if (options.min_bytes < sizeof(float) || options.max_bytes < options.min_bytes ||
        options.max_bytes > kMaxCommBytes) {
      throw comm::ConfigError(fmt::format(
          "--min-bytes and --max-bytes must satisfy 4 <= min <= max <= {} ({} MiB), got {} and {}",
          kMaxCommBytes, kMaxCommBytes >> 20, options.min_bytes, options.max_bytes));
    }
    if (options.tune && options.common.device == "cuda") {
      throw comm::ConfigError("bench comm --tune-table measures host buffers: drop --device cuda");
    }
    if (options.tune && options.dtype != "float32") {
      throw comm::ConfigError("bench comm --tune-table measures float32 buffers: drop --dtype " +
                              options.dtype);
    }
    payload.device = options.tune ? kernels::Device::cpu : resolve_device(options.common.device);
    payload.dtype = options.dtype == "bfloat16" ? kernels::DType::bf16 : kernels::DType::f32;
    prepare_run(options.common, world);
    if (options.tune) check_tune_request(world.size(), world.rank(), options.ops, tune_path);
    return fmt::format(
        "bench comm --device {} --dtype {} --min-bytes {} --max-bytes {} --max-iterations {} "
        "--ops {}{}",
        kernels::to_string(payload.device), options.dtype, options.min_bytes, options.max_bytes,
        options.max_iterations, fmt::join(options.ops, ","),
        options.tune ? " --tune-table " + *options.tune : "");
  });
  if (options.tune) {
    return run_comm_tune(world, options.ops, options.min_bytes, options.max_bytes,
                         options.max_iterations, tune_path);
  }
  const bool print = world.rank() == 0;
  if (print) {
    const comm::AlgorithmTable* table = world.algorithm_table();
    fmt::print(
        "bench comm: {}, {} {} buffers; time = median of {} of the slowest rank per call "
        "(send/recv: one way of a ping-pong of rank pairs); iters = timed calls per path; "
        "GB/s = 1e9 bytes/s; bus GB/s = mpitron's, nccl-tests convention; algorithms: {}\n"
        "{:<15} {:>11} {:>6} {:>12} {:>12} {:>7} {:>12} {:>10} {:>10}  {}\n",
        nn::counted(world.size(), "rank"), kernels::to_string(payload.device), options.dtype,
        nn::counted(std::min(kCommRounds, options.max_iterations), "round"),
        table != nullptr ? "comm table " + table->source + " (" + table->measured_on + ")"
                         : std::string("the built-in rule"),
        "op", "bytes", "iters", "mpitron us", "MPI us", "ratio", "mpitron GB/s", "MPI GB/s",
        "bus GB/s", "algorithm");
  }
  nlohmann::json results = nlohmann::json::array();
  bool all_match = true;
  for (const std::string& name : options.ops) {
    const CommOp op = comm_op_named(name);
    if (op == CommOp::send_recv && world.size() < 2) {
      if (print) fmt::print("{:<15} skipped: it needs at least 2 ranks\n", to_string(op));
      continue;
    }
    std::size_t previous_n = 0;  // sizes that round to the same count are timed once
    for (const std::size_t size : comm_sizes(options.min_bytes, options.max_bytes)) {
      const std::size_t n = comm_elements(op, size, world.size(), payload.dtype);
      if (n == previous_n) continue;
      previous_n = n;
      const std::size_t bytes = payload.bytes(n);
      const bool match = results_match(op, world, n, payload);
      all_match = all_match && match;
      const Timing t =
          measure(op, world, n, comm_iterations(bytes, options.max_iterations), payload);
      const double gbps_mpitron = static_cast<double>(bytes) / t.mpitron_s / 1e9;
      const double gbps_mpi = static_cast<double>(bytes) / t.mpi_s / 1e9;
      const double bus = bus_factor(op, world.size());
      if (print) {
        fmt::print(
            "{:<15} {:>11} {:>6} {:>12.1f} {:>12.1f} {:>7.2f} {:>12.2f} {:>10.2f} {:>10.2f}  "
            "{}{}\n",
            to_string(op), size_text(bytes), t.iterations, t.mpitron_s * 1e6, t.mpi_s * 1e6,
            t.mpitron_s / t.mpi_s, gbps_mpitron, gbps_mpi, gbps_mpitron * bus, t.algorithm,
            match ? "" : "  RESULTS DIFFER");
      }
      results.push_back({{"op", to_string(op)},
                         {"bytes", bytes},
                         {"iterations", t.iterations},
                         {"results_match", match},
                         {"algorithm", t.algorithm},
                         {"mpitron_us", t.mpitron_s * 1e6},
                         {"mpi_us", t.mpi_s * 1e6},
                         {"mpitron_gbps", gbps_mpitron},
                         {"mpi_gbps", gbps_mpi},
                         {"mpitron_bus_gbps", gbps_mpitron * bus},
                         {"mpi_bus_gbps", gbps_mpi * bus}});
    }
  }
  if (print && !options.common.json.empty()) {
    write_json(options.common.json,
               nlohmann::json{{"tool", "mpitron"},
                              {"bench", "comm"},
                              {"world_size", world.size()},
                              {"device", kernels::to_string(payload.device)},
                              {"dtype", options.dtype},
                              {"results", results}},
               /*append=*/true);
  }
  return all_match ? 0 : 1;
}

}  // namespace mpitron::app
