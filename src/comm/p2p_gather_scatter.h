// All-gather and reduce-scatter of rank-major blocks on point-to-point messages, used by
// comm::all_gather and comm::reduce_scatter (gather_scatter.cpp) for host memory: on a
// power-of-two number of ranks the reduce-scatter by recursive halving and the smaller
// all-gathers by recursive doubling (butterfly.h), otherwise both as rings (the halves of the ring
// all-reduce, ring_all_reduce.h). Open MPI's non-blocking MPI_Iallgather and
// MPI_Ireduce_scatter_block (libnbc) took 1.2-3x the blocking calls' time on 2 ranks (bench comm);
// these keep the deadline routine and cut small transfers into eager messages (collective_steps.h).
#pragma once

#include <cstddef>

#include "comm/algorithm_table.h"
#include "comm/communicator.h"
#include "comm/reduce_op.h"
#include "comm/wait.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// True when reduce_scatter of `buffer` chooses between p2p_reduce_scatter and MPI's blocking
/// call (reduce_scatter_algorithm, algorithm_choice.h): more than one rank and a CPU buffer that
/// MPI reads in place (staged buffers, CUDA ones included, keep MPI's non-blocking reduction so
/// staged and direct results stay identical).
bool uses_p2p_reduce_scatter(const Communicator& comm, const kernels::Buffer& buffer);

/// On p ranks, the built-in rule (all_gather_algorithm) takes the ring for blocks of at least
/// this many bytes x p^2, the recursive doubling below (and on groups that are no power of two,
/// always the ring): the
/// doubling's last step moves half the result at once, the ring p - 1 steps of one block each,
/// and each ring step waits on both neighbours. Ratio to MPI_Allgather's time, doubling vs ring,
/// bench comm, ranks sharing 2 cores: 4 ranks, 512 KiB 0.92-1.05 vs 0.97-1.02 (3 runs),
/// 1-16 MiB 0.95-1.15 vs 0.83-0.95 (5 runs); 8 ranks, 1-4 MiB 0.98-1.04 vs 1.13-1.28 (2 runs),
/// 8 MiB 1.02-1.10 vs 0.86-0.94 (3 runs). 2 ranks take the same single exchange either way.
inline constexpr std::size_t kRingAllGatherBlockBytesPerRankSquared = 16 * 1024;

/// On more than 2 ranks the built-in rule (all_gather_algorithm) hands all-gathers of fewer
/// than this many bytes in all (the gathered output) to MPI's blocking MPI_Allgather: at 4 KiB it
/// took 10.4 us against recursive doubling's 12.2 and the ring's 15.6, 4 ranks on a 2-core Zen 4
/// (bench comm --tune-table, 2026-12-03), and 1.01x against 1.09-1.12x MPI's time in bench comm
/// earlier the same day; from 16 KiB mpitron's won (19.8 against 24.6 us). On 2 ranks the single
/// exchange stays mpitron's (0.85x MPI's time at 4 KiB). Reduce-scatter keeps its own algorithms
/// at every size: their order of reduction is documented and tested (p2p_reduce_scatter).
inline constexpr std::size_t kMpiAllGatherBelowBytes = 8 * 1024;

/// out[out_offset + q*count, +count) = rank q's in[in_offset, +count) for every rank q of
/// `comm` ([count] per rank -> [size, count]). This rank's block is first copied into `out`.
/// `algorithm` recursive_doubling (p a power of two): in step k = 0 .. log2(p) - 1 rank r
/// exchanges the 2^k blocks it holds with rank r xor 2^k; ring: in p - 1 steps rank r sends block
/// (r - s) mod p to rank r + 1 and receives block (r - s - 1) mod p from rank r - 1
/// (all_gather_algorithm, algorithm_choice.h, chooses). The first step sends this rank's block
/// from `in`. `in` and `out` share a dtype and live in host memory; the blocks do not overlap.
/// Each step waits through the deadline routine as `op`. Throws MpiError when an MPI call fails.
void p2p_all_gather(const Communicator& comm, const kernels::Buffer& in, std::size_t in_offset,
                    kernels::Buffer& out, std::size_t out_offset, std::size_t count,
                    Algorithm algorithm, const Operation& op);

/// out[out_offset + i] = op over ranks of that rank's in[in_offset + r*count + i] for i < count,
/// r this rank ([size, count] per rank -> [count]; avg: the sum). `algorithm`
/// recursive_halving (p a power of two): for d = p/2, p/4, .., 1 rank r sends the half of the
/// blocks it holds that lies on rank r xor d's side and combines the other half with what
/// arrives, the lower rank's operand first, so element i is reduced as a butterfly over the rank
/// bits, highest bit first. ring: block c starts at rank c + 1 and travels the ring, each rank
/// combining its own block first with what arrived: x_c op (x_{c-1} op (... op x_{c+1})),
/// indices mod p. The order is the same on every run. `in` is not modified; host memory, one
/// dtype. Each step waits through the deadline routine as `wait_op`. Throws MpiError when an MPI
/// call fails.
void p2p_reduce_scatter(const Communicator& comm, const kernels::Buffer& in, std::size_t in_offset,
                        kernels::Buffer& out, std::size_t out_offset, std::size_t count,
                        ReduceOp op, Algorithm algorithm, const Operation& wait_op);

}  // namespace mpitron::comm
