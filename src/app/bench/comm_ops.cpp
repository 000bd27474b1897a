#include "app/bench/comm_ops.h"

#include <mpi.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <stdexcept>
#include <vector>

#include "comm/agreement.h"
#include "comm/algorithm_choice.h"
#include "comm/bf16_reduction.h"
#include "comm/collectives.h"
#include "comm/point_to_point.h"
#include "kernels/ops.h"

namespace mpitron::app {

using kernels::Buffer;
using kernels::Device;
using kernels::DType;

std::string to_string(CommOp op) {
  switch (op) {
    case CommOp::all_reduce:
      return "all-reduce";
    case CommOp::all_gather:
      return "all-gather";
    case CommOp::reduce_scatter:
      return "reduce-scatter";
    case CommOp::send_recv:
      return "send/recv";
  }
  return "?";
}

std::vector<std::string> comm_op_names() {
  std::vector<std::string> names;
  for (CommOp op : kCommOps)
    names.push_back(to_string(op));
  return names;
}

CommOp comm_op_named(const std::string& name) {
  for (CommOp op : kCommOps) {
    if (to_string(op) == name) return op;
  }
  throw std::invalid_argument("bench comm: no operation named '" + name + "'");
}

std::optional<comm::Collective> collective_of(CommOp op) {
  switch (op) {
    case CommOp::all_reduce:
      return comm::Collective::all_reduce;
    case CommOp::all_gather:
      return comm::Collective::all_gather;
    case CommOp::reduce_scatter:
      return comm::Collective::reduce_scatter;
    case CommOp::send_recv:
      return std::nullopt;
  }
  return std::nullopt;
}

double bus_factor(CommOp op, int size) {
  const double n = size;
  switch (op) {
    case CommOp::all_reduce:
      return 2.0 * (n - 1.0) / n;
    case CommOp::all_gather:
    case CommOp::reduce_scatter:
      return (n - 1.0) / n;
    case CommOp::send_recv:
      return 1.0;
  }
  return 1.0;
}

namespace {

bool scatters(CommOp op) {
  return op == CommOp::all_gather || op == CommOp::reduce_scatter;
}

Buffer host_filled(std::size_t n, int rank, DType dtype) {
  Buffer buffer(n, DType::f32, Device::cpu);
  float* values = buffer.data_as<float>();
  for (std::size_t i = 0; i < n; ++i)
    values[i] = static_cast<float>((static_cast<std::size_t>(rank) * 7 + i) % 13);
  if (dtype == DType::f32) return buffer;
  Buffer narrow(n, dtype, Device::cpu);
  kernels::convert(buffer, narrow);
  return narrow;
}

// The ping-pong partner of this rank, or -1 for an unpaired last rank.
int partner(const comm::Communicator& comm) {
  const int peer = comm.rank() ^ 1;
  return peer < comm.size() ? peer : -1;
}

}  // namespace

std::size_t comm_elements(CommOp op, std::size_t bytes, int size, DType dtype) {
  const auto ranks = static_cast<std::size_t>(size);
  const std::size_t n = bytes / kernels::dtype_size(dtype);
  return scatters(op) ? std::max(n / ranks, std::size_t{1}) * ranks : std::max(n, ranks);
}

CommBuffers make_comm_buffers(CommOp op, std::size_t n, int size, int rank, Device device,
                              DType dtype) {
  const std::size_t share = n / static_cast<std::size_t>(size);
  const std::size_t in_n = op == CommOp::all_gather ? share : n;
  const std::size_t out_n = op == CommOp::all_gather ? n : op == CommOp::reduce_scatter ? share : 0;
  CommBuffers buffers;
  buffers.in = host_filled(in_n, rank, dtype).to(device);
  buffers.out = Buffer(out_n, dtype, device);
  if (device != Device::cpu) {
    buffers.host_in = Buffer(in_n, dtype, Device::cpu);
    buffers.host_out = Buffer(out_n, dtype, Device::cpu);
  }
  return buffers;
}

void run_mpitron(CommOp op, const comm::Communicator& comm, CommBuffers& buffers) {
  switch (op) {
    case CommOp::all_reduce:
      comm::all_reduce(comm, buffers.in, comm::ReduceOp::sum);
      return;
    case CommOp::all_gather:
      comm::all_gather(comm, buffers.in, buffers.out, 1);
      return;
    case CommOp::reduce_scatter:
      comm::reduce_scatter(comm, buffers.in, buffers.out, 1, comm::ReduceOp::sum);
      return;
    case CommOp::send_recv: {
      const int peer = partner(comm);
      if (peer < 0) return;
      const std::array<std::int64_t, 1> shape{static_cast<std::int64_t>(buffers.in.numel())};
      if (comm.rank() % 2 == 0) {
        comm::send(comm, buffers.in, shape, peer);
        comm::recv(comm, buffers.in, shape, peer);
      } else {
        comm::recv(comm, buffers.in, shape, peer);
        comm::send(comm, buffers.in, shape, peer);
      }
      return;
    }
  }
}

namespace {

void check(int status, const char* call) {
  if (status != MPI_SUCCESS)
    throw std::runtime_error(std::string("bench comm: ") + call + " failed");
}

// The plain MPI calls on host memory.
void mpi_on_host(CommOp op, const comm::Communicator& comm, Buffer& in, Buffer& out) {
  MPI_Comm native = comm.native();
  const int n = static_cast<int>(in.numel());
  const bool narrow = in.dtype() == DType::bf16;
  const MPI_Datatype type = narrow ? MPI_UINT16_T : MPI_FLOAT;
  const MPI_Op sum = narrow ? comm::bf16_mpi_op(comm::ReduceOp::sum) : MPI_SUM;
  switch (op) {
    case CommOp::all_reduce:
      check(MPI_Allreduce(MPI_IN_PLACE, in.data(), n, type, sum, native), "MPI_Allreduce");
      return;
    case CommOp::all_gather:
      check(MPI_Allgather(in.data(), n, type, out.data(), n, type, native), "MPI_Allgather");
      return;
    case CommOp::reduce_scatter:
      check(MPI_Reduce_scatter_block(in.data(), out.data(), static_cast<int>(out.numel()), type,
                                     sum, native),
            "MPI_Reduce_scatter_block");
      return;
    case CommOp::send_recv: {
      const int peer = partner(comm);
      if (peer < 0) return;
      if (comm.rank() % 2 == 0) {
        check(MPI_Send(in.data(), n, type, peer, 0, native), "MPI_Send");
        check(MPI_Recv(in.data(), n, type, peer, 0, native, MPI_STATUS_IGNORE), "MPI_Recv");
      } else {
        check(MPI_Recv(in.data(), n, type, peer, 0, native, MPI_STATUS_IGNORE), "MPI_Recv");
        check(MPI_Send(in.data(), n, type, peer, 0, native), "MPI_Send");
      }
      return;
    }
  }
}

}  // namespace

void run_mpi(CommOp op, const comm::Communicator& comm, CommBuffers& buffers) {
  if (buffers.in.device() == Device::cpu) {
    mpi_on_host(op, comm, buffers.in, buffers.out);
    return;
  }
  kernels::copy(buffers.in, buffers.host_in);
  mpi_on_host(op, comm, buffers.host_in, buffers.host_out);
  if (op == CommOp::all_reduce || op == CommOp::send_recv) {
    kernels::copy(buffers.host_in, buffers.in);
  } else {
    kernels::copy(buffers.host_out, buffers.out);
  }
}

const Buffer& comm_result(CommOp op, const CommBuffers& buffers) {
  return scatters(op) ? buffers.out : buffers.in;
}

std::string algorithm_taken(CommOp op, const comm::Communicator& comm, const CommBuffers& buffers) {
  switch (op) {
    case CommOp::all_reduce:
      return std::string(comm::to_string(comm::all_reduce_algorithm(comm, buffers.in)));
    case CommOp::all_gather:
      return std::string(comm::to_string(comm::all_gather_algorithm(comm, buffers.in)));
    case CommOp::reduce_scatter:
      return std::string(comm::to_string(comm::reduce_scatter_algorithm(comm, buffers.in)));
    case CommOp::send_recv:
      return "header + payload";
  }
  return "";
}

int comm_iterations(std::size_t bytes, int max_iterations) {
  return static_cast<int>(
      std::min<std::size_t>(std::max<std::size_t>(kCommBudgetBytes / bytes, kMinCommIterations),
                            static_cast<std::size_t>(max_iterations)));
}

std::vector<std::size_t> comm_sizes(std::size_t min_bytes, std::size_t max_bytes) {
  std::vector<std::size_t> sizes;
  for (std::size_t size = min_bytes; size <= max_bytes;
       size = size > max_bytes / 4 ? max_bytes + 1 : size * 4) {
    sizes.push_back(size);
  }
  return sizes;
}

std::string size_text(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 20) && bytes % (std::size_t{1} << 20) == 0)
    return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

double time_calls(const comm::Communicator& world, int iterations,
                  const std::function<void()>& run) {
  comm::barrier(world);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i)
    run();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return comm::all_reduce_scalar(world, seconds, comm::ReduceOp::max) / iterations;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

}  // namespace mpitron::app
