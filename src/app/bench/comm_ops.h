// The operations `mpitron bench comm` times, each run two ways on the same buffers: through
// mpitron's comm layer, and as the plain MPI call (for CUDA buffers: a plain device-to-host copy,
// the MPI call on host memory and the copy back).
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/algorithm_table.h"
#include "comm/communicator.h"
#include "kernels/device.h"

namespace mpitron::app {

enum class CommOp { all_reduce, all_gather, reduce_scatter, send_recv };

/// Every CommOp, in the order bench comm times them by default.
inline constexpr std::array<CommOp, 4> kCommOps{CommOp::all_reduce, CommOp::all_gather,
                                                CommOp::reduce_scatter, CommOp::send_recv};

/// "all-reduce", "all-gather", "reduce-scatter", "send/recv".
std::string to_string(CommOp op);

/// to_string of every op of kCommOps, in that order (the names --ops accepts).
std::vector<std::string> comm_op_names();

/// The CommOp whose to_string is `name`; throws std::invalid_argument for another name.
CommOp comm_op_named(const std::string& name);

/// The collective a table chooses the algorithm of for `op`; nullopt for send/recv.
std::optional<comm::Collective> collective_of(CommOp op);

/// Bus bandwidth per algorithm bandwidth (bytes/time) on `size` ranks, the nccl-tests
/// convention: 2(size-1)/size for all-reduce, (size-1)/size for all-gather and reduce-scatter,
/// 1 for send/recv.
double bus_factor(CommOp op, int size);

/// One rank's buffers (float32, or bfloat16 for --dtype bfloat16) for `op` with `n` reported
/// elements: all-reduce in [n] (in place);
/// all-gather in [n/size] -> out [n]; reduce-scatter in [n] -> out [n/size]; send/recv in [n].
/// `host_in`/`host_out` mirror in/out in host memory for the plain path of CUDA buffers.
struct CommBuffers {
  kernels::Buffer in, out, host_in, host_out;
};

/// The largest element count <= bytes / (dtype's size) whose per-rank share is whole for `op` (a
/// multiple of `size` for all-gather and reduce-scatter); at least `size`.
std::size_t comm_elements(CommOp op, std::size_t bytes, int size,
                          kernels::DType dtype = kernels::DType::f32);

/// Allocates `op`'s buffers of `dtype` (f32 or bf16) for `n` elements (from comm_elements) on
/// `device` and fills the inputs with small integers (0 to 12) depending on rank and index, so
/// every sum over up to 19 ranks is exact in float32 and in bfloat16 (integers up to 256).
CommBuffers make_comm_buffers(CommOp op, std::size_t n, int size, int rank, kernels::Device device,
                              kernels::DType dtype = kernels::DType::f32);

/// Runs `op` once through comm (all_reduce, all_gather, reduce_scatter with outer 1; send and
/// recv with a [n] shape). send/recv is a ping-pong of rank 2k with 2k+1 (one call is a round
/// trip; an unpaired last rank does nothing).
void run_mpitron(CommOp op, const comm::Communicator& comm, CommBuffers& buffers);

/// Runs `op` once as the blocking MPI call (MPI_Allreduce in place, MPI_Allgather,
/// MPI_Reduce_scatter_block, MPI_Send/MPI_Recv ping-pong) on comm.native(), on the buffers
/// themselves for host memory, else on host_in/host_out with plain copies around the call.
/// bfloat16 travels as MPI_UINT16_T and is summed by comm::bf16_mpi_op.
void run_mpi(CommOp op, const comm::Communicator& comm, CommBuffers& buffers);

/// The buffer holding `op`'s result after a run (out, or in for the in-place operations).
const kernels::Buffer& comm_result(CommOp op, const CommBuffers& buffers);

/// The name of the algorithm run_mpitron(op, comm, buffers) takes (comm/algorithm_choice.h),
/// "header + payload" for send/recv.
std::string algorithm_taken(CommOp op, const comm::Communicator& comm, const CommBuffers& buffers);

/// Timed rounds per measurement: a burst of load from other processes on a shared machine then
/// spoils one round of every path, not the whole of one.
inline constexpr int kCommRounds = 5;

/// Bytes moved per measurement: calls = min(max(budget / size, kMinCommIterations), most).
inline constexpr std::size_t kCommBudgetBytes = std::size_t{512} << 20;
inline constexpr int kMinCommIterations = 5;

/// The calls per measurement of `bytes`, at most `max_iterations` (see kCommBudgetBytes).
int comm_iterations(std::size_t bytes, int max_iterations);

/// The sizes bench comm times: min_bytes, 4 x min_bytes, ... up to max_bytes.
std::vector<std::size_t> comm_sizes(std::size_t min_bytes, std::size_t max_bytes);

/// "4 KiB", "64 MiB", "12 B".
std::string size_text(std::size_t bytes);

/// Seconds per call of `run`, the slowest rank's of `world`, after the ranks of `world` line up
/// (comm::barrier); `iterations` calls.
double time_calls(const comm::Communicator& world, int iterations,
                  const std::function<void()>& run);

/// The median of `values` (not empty).
double median(std::vector<double> values);

}  // namespace mpitron::app
