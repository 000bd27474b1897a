// A tiny multi-rank program that fails on purpose, run by ctest through mpiexec to check how a
// job ends (exit code, the one error line, no hang). Usage: comm_fault_program MODE, where MODE
// is one of
//   skip-recv     rank 0 sends 16 MiB to rank 1 with a 5 s deadline; rank 1 never receives
//                 (it waits in a barrier with a 60 s deadline). Expect the deadline line from
//                 rank 0 and a non-zero exit within 20 s.
//   skip-send     rank 1 starts receiving 16 floats from rank 0 with a 3 s deadline, computes
//                 (sleeps 0.5 s) and waits for it; rank 0 never sends (it waits in a barrier
//                 with a 60 s deadline). Expect the deadline line from rank 1 within 20 s.
//   stall-all-reduce  on 4 ranks: ranks 0 and 1 enter an all_reduce with a 3 s deadline, rank 2
//                 waits in a recv from rank 0 instead, rank 3 computes (sleeps 30 s). Expect the
//                 deadline line with "arrived: ranks 0, 1" and ranks 2 and 3 named with what
//                 they were doing.
//   stall-chain   on 3 ranks: rank 0 receives from rank 1 with a 3 s deadline, rank 1 from rank 2
//                 with a 4 s one, rank 2 computes (sleeps 30 s). Rank 0 expires first and learns
//                 only that rank 1 is waiting; expect rank 1's line naming rank 2 as the one that
//                 did not answer (rank 0 waits for it instead of ending the job at once).
//   stall-mpi-all-reduce  on 2 ranks, with a table that hands all-reduce to MPI's blocking
//                 collective: rank 0 enters it with a 3 s deadline, rank 1 computes (sleeps
//                 30 s). Expect the watch thread's deadline line from rank 0 within 20 s.
//   throw         the last rank throws while the others wait in a barrier: run_guarded prints
//                 its line and aborts the job with exit code 1.
//   uncaught      the last rank lets an exception escape main: the terminate handler prints
//                 the line and aborts the job.
//   bad-topology  tp*pp*dp = 2*2*2 on a world that is not 8: every rank prints the ConfigError
//                 and the job exits 2 after a clean finalize.
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/algorithm_table.h"
#include "comm/collectives.h"
#include "comm/environment.h"
#include "comm/guard.h"
#include "comm/point_to_point.h"
#include "comm/topology.h"

namespace {

using namespace mpitron;

int skip_receive(comm::Communicator& world) {
  world.set_timeout(world.rank() == 0 ? 5.0 : 60.0);
  constexpr std::size_t kFloats = std::size_t{4} << 20;  // 16 MiB: beyond any eager limit
  if (world.rank() == 0) {
    kernels::Buffer payload(kFloats, kernels::DType::f32, kernels::Device::cpu);
    const std::vector<std::int64_t> shape{static_cast<std::int64_t>(kFloats)};
    comm::send(world, payload, shape, 1);
  }
  comm::barrier(world);
  return 0;
}

int skip_send(comm::Communicator& world) {
  world.set_timeout(world.rank() == 1 ? 3.0 : 60.0);
  if (world.rank() == 1) {
    kernels::Buffer payload(16, kernels::DType::f32, kernels::Device::cpu);
    const std::vector<std::int64_t> shape{16};
    comm::RecvRequest request = comm::irecv(world, payload, shape, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    request.wait();
  }
  comm::barrier(world);
  return 0;
}

int stall_all_reduce(comm::Communicator& world) {
  world.set_timeout(world.rank() < 2 ? 3.0 : 60.0);
  kernels::Buffer value(1, kernels::DType::f64, kernels::Device::cpu);
  if (world.rank() < 2) comm::all_reduce(world, value, comm::ReduceOp::sum);
  const std::vector<std::int64_t> shape{1};
  if (world.rank() == 2) comm::recv(world, value, shape, 0);
  if (world.rank() == 3) std::this_thread::sleep_for(std::chrono::seconds(30));
  return 0;
}

int stall_chain(comm::Communicator& world) {
  world.set_timeout(world.rank() == 0 ? 3.0 : 4.0);
  kernels::Buffer value(16, kernels::DType::f32, kernels::Device::cpu);
  const std::vector<std::int64_t> shape{16};
  if (world.rank() < 2) comm::recv(world, value, shape, world.rank() + 1);
  if (world.rank() == 2) std::this_thread::sleep_for(std::chrono::seconds(30));
  return 0;
}

int stall_mpi_all_reduce(comm::Communicator& world) {
  auto table = std::make_shared<comm::AlgorithmTable>();
  table->world_size = world.size();
  table->choices.push_back({comm::Collective::all_reduce, world.size(), 0,
                            std::numeric_limits<std::size_t>::max(), comm::Algorithm::mpi});
  world.set_algorithm_table(std::move(table));
  world.set_timeout(world.rank() == 0 ? 3.0 : 60.0);
  kernels::Buffer value(1, kernels::DType::f64, kernels::Device::cpu);
  if (world.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(30));
  comm::all_reduce(world, value, comm::ReduceOp::sum);
  return 0;
}

int run(const std::string& mode, comm::Communicator& world) {
  world.set_timeout(60.0);
  if (mode == "skip-recv") return skip_receive(world);
  if (mode == "skip-send") return skip_send(world);
  if (mode == "stall-all-reduce") return stall_all_reduce(world);
  if (mode == "stall-chain") return stall_chain(world);
  if (mode == "stall-mpi-all-reduce") return stall_mpi_all_reduce(world);
  if (mode == "throw") {
    if (world.rank() == world.size() - 1) throw std::runtime_error("injected failure");
    comm::barrier(world);
    return 0;
  }
  if (mode == "bad-topology") {
    const comm::ParallelTopology topology(world, 2, 2, 2);
    return 0;
  }
  throw std::invalid_argument("unknown mode '" + mode + "'");
}

}  // namespace

int main(int argc, char** argv) {
  comm::Environment environment(argc, argv);
  comm::Communicator& world = environment.world();
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "uncaught") {
    if (world.rank() == world.size() - 1) throw std::runtime_error("escaped main");
    comm::barrier(world);
    return 0;
  }
  return comm::run_guarded(world, [&] { return run(mode, world); });
}
