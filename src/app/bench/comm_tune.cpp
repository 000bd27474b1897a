#include "app/bench/comm_tune.h"

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>

#include "comm/agreement.h"
#include "comm/algorithm_choice.h"
#include "comm/environment.h"
#include "comm/errors.h"
#include "nn/wording.h"

namespace mpitron::app {

using comm::Algorithm;
using comm::Collective;

std::vector<comm::Collective> tuned_collectives(const std::vector<std::string>& ops) {
  std::vector<Collective> tuned;
  for (const std::string& name : ops) {
    if (const auto collective = collective_of(comm_op_named(name))) tuned.push_back(*collective);
  }
  return tuned;
}

std::vector<int> tuned_group_sizes(int world_size) {
  std::vector<int> sizes;
  for (int g = 2; g <= world_size; ++g) {
    if (world_size % g == 0) sizes.push_back(g);
  }
  return sizes;
}

void check_tune_request(int world_size, int rank, const std::vector<std::string>& ops,
                        const std::string& path) {
  if (world_size < 2) {
    throw comm::ConfigError(
        "bench comm --tune-table needs at least 2 ranks (mpirun -np 2 or more)");
  }
  if (tuned_collectives(ops).empty()) {
    throw comm::ConfigError(fmt::format(
        "bench comm --tune-table chooses algorithms of all-reduce, all-gather and reduce-scatter, "
        "and --ops {} has none of them",
        fmt::join(ops, ",")));
  }
  if (rank != 0) return;
  const bool existed = std::filesystem::exists(path);
  const bool writable =
      !std::filesystem::is_directory(path) && std::ofstream(path, std::ios::app).good();
  std::error_code ignored;
  if (!existed) std::filesystem::remove(path, ignored);  // no empty table if the tune stops
  if (!writable) {
    throw comm::ConfigError(fmt::format("cannot write the --tune-table file '{}'", path));
  }
}

namespace {

// "host, <CPU model>, <MPI library>, <date>" for the table's measured_on.
std::string machine_text() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '?';
  std::string cpu = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.starts_with("model name")) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  const std::time_t now = std::time(nullptr);
  std::array<char, 32> date{};
  std::strftime(date.data(), date.size(), "%Y-%m-%d", std::gmtime(&now));
  const std::string mpi = comm::mpi_library_version();
  return fmt::format("{}, {}, {}, {}", host.data(), cpu, mpi.substr(0, mpi.find(',')), date.data());
}

// The algorithm `op` takes on `group` for `buffers` (what the forced table made it take).
Algorithm taken(CommOp op, const comm::Communicator& group, const CommBuffers& buffers) {
  switch (op) {
    case CommOp::all_reduce:
      return comm::all_reduce_algorithm(group, buffers.in);
    case CommOp::all_gather:
      return comm::all_gather_algorithm(group, buffers.in);
    default:
      return comm::reduce_scatter_algorithm(group, buffers.in);
  }
}

CommOp bench_op(Collective op) {
  switch (op) {
    case Collective::all_reduce:
      return CommOp::all_reduce;
    case Collective::all_gather:
      return CommOp::all_gather;
    case Collective::reduce_scatter:
      return CommOp::reduce_scatter;
  }
  return CommOp::all_reduce;
}

// True on every rank when `algorithm` gives exactly MPI's result for fresh inputs on `group`.
bool gives_mpi_result(const comm::Communicator& world, const comm::Communicator& group, CommOp op,
                      std::size_t n, Algorithm algorithm) {
  CommBuffers mine = make_comm_buffers(op, n, group.size(), group.rank(), kernels::Device::cpu);
  CommBuffers plain = make_comm_buffers(op, n, group.size(), group.rank(), kernels::Device::cpu);
  {
    const comm::ForcedAlgorithm forced(world, *collective_of(op), group.size(), algorithm);
    run_mpitron(op, group, mine);
  }
  run_mpi(op, group, plain);
  const kernels::Buffer& a = comm_result(op, mine);
  const kernels::Buffer& b = comm_result(op, plain);
  const bool same = std::memcmp(a.data(), b.data(), a.bytes()) == 0;
  return comm::all_reduce_scalar(world, same ? 0.0 : 1.0, comm::ReduceOp::max) == 0.0;
}

}  // namespace

int run_comm_tune(const comm::Communicator& world, const std::vector<std::string>& ops,
                  std::size_t min_bytes, std::size_t max_bytes, int max_iterations,
                  const std::string& path) {
  const bool print = world.rank() == 0;
  const std::vector<int> groups = tuned_group_sizes(world.size());
  const std::vector<Collective> collectives = tuned_collectives(ops);
  if (print) {
    fmt::print(
        "bench comm --tune-table: {}, groups of {} ranks; us per call = median of {} of the "
        "slowest "
        "rank (groups run side by side); mpitron's algorithm is chosen below {:.0f} % of MPI's "
        "time\n",
        nn::counted(world.size(), "rank"), fmt::join(groups, ", "),
        nn::counted(kCommRounds, "round"), 100 * comm::kOwnAlgorithmMargin);
  }
  std::vector<comm::AlgorithmTiming> measurements;
  bool all_match = true;
  for (const int g : groups) {
    const comm::Communicator group = world.split(world.rank() / g, world.rank(), "tune");
    for (const Collective collective : collectives) {
      const CommOp op = bench_op(collective);
      for (const std::size_t size : comm_sizes(min_bytes, max_bytes)) {
        const std::size_t n = comm_elements(op, size, g);
        comm::AlgorithmTiming m{collective, g, n * sizeof(float), {}, {}};
        if (!measurements.empty() && measurements.back().op == collective &&
            measurements.back().ranks == g && measurements.back().bytes == m.bytes) {
          continue;  // sizes that round to the same count are measured once
        }
        for (const Algorithm algorithm : comm::algorithms_for(collective)) {
          if (!comm::applicable(collective, algorithm, g, n, true)) continue;
          if (!gives_mpi_result(world, group, op, n, algorithm)) {
            all_match = false;
            if (print) {
              fmt::print("{} on {} ranks, {} B: {} gave another result than MPI's; not chosen\n",
                         to_string(op), g, m.bytes, comm::to_string(algorithm));
            }
            continue;
          }
          m.algorithms.push_back(algorithm);
        }
        CommBuffers buffers = make_comm_buffers(op, n, g, group.rank(), kernels::Device::cpu);
        const int iterations = comm_iterations(m.bytes, max_iterations);
        const int rounds = std::min(kCommRounds, iterations);
        std::vector<std::vector<double>> rounds_s(m.algorithms.size());
        for (int round = -1; round < rounds; ++round) {  // round -1: one untimed warm-up call
          for (std::size_t k = 0; k < m.algorithms.size(); ++k) {
            const std::size_t a =
                (k + static_cast<std::size_t>(std::max(round, 0))) % m.algorithms.size();
            const comm::ForcedAlgorithm forced(world, collective, g, m.algorithms[a]);
            if (taken(op, group, buffers) != m.algorithms[a]) {
              throw std::logic_error("bench comm --tune-table: the forced algorithm was not taken");
            }
            const int calls = round < 0 ? 1 : iterations / rounds;
            const double s = time_calls(world, calls, [&] { run_mpitron(op, group, buffers); });
            if (round >= 0) rounds_s[a].push_back(s);
          }
        }
        for (const std::vector<double>& times : rounds_s)
          m.seconds.push_back(median(times));
        if (print) {
          std::string line = fmt::format("{:<15} {:>5} {:>11}", to_string(op),
                                         nn::counted(g, "rank"), size_text(m.bytes));
          for (std::size_t a = 0; a < m.algorithms.size(); ++a)
            line +=
                fmt::format("  {} {:.1f}", comm::to_string(m.algorithms[a]), m.seconds[a] * 1e6);
          fmt::print("{}  -> {}\n", line, comm::to_string(comm::fastest(m)));
        }
        measurements.push_back(std::move(m));
      }
    }
  }
  if (print) {
    comm::AlgorithmTable table;
    table.world_size = world.size();
    table.measured_on = machine_text();
    table.choices = comm::choices_from(measurements);
    std::ofstream file(path, std::ios::trunc);
    file << table.to_json();
    if (!file.good()) throw std::runtime_error(fmt::format("writing '{}' failed", path));
    fmt::print(
        "bench comm --tune-table: wrote {} ({} for a world of {}); use it with --comm-table {} or "
        "{}={}\n",
        path, nn::counted(table.choices.size(), "choice"), world.size(), path,
        comm::kAlgorithmTableVariable, path);
  }
  return all_match ? 0 : 1;
}

}  // namespace mpitron::app
