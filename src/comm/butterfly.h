// Reduce-scatter by recursive halving, all-gather by recursive doubling, and Rabenseifner's
// all-reduce made of the two (Thakur, Rabenseifner and Gropp, "Optimization of collective
// communication operations in MPICH", 2005, sections 4.1 and 4.4; Rabenseifner, "Optimization of
// collective reduction operations", ICCS 2004), on point-to-point messages among a power-of-two
// number of ranks (communication layer internal). A buffer of n elements is cut into p chunks
// with even_chunks (chunking.h); rank r owns chunk r. Each takes log2(p) steps where the ring
// takes p - 1: on 4 ranks sharing 2 cores a 256 KiB all-reduce is 2 log2(p) = 4 exchanges
// instead of the ring's 2 (p - 1) = 6, and every exchange waits for a peer that may be off-core.
#pragma once

#include <cstddef>

#include "comm/communicator.h"
#include "comm/reduce_op.h"
#include "comm/wait.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// True when p = comm.size() is a power of two above 1 (the ranks these algorithms serve).
bool is_butterfly_group(const Communicator& comm);

/// Buffers from this many bytes on take the ring on every group: its steps move n / p elements,
/// where Rabenseifner's first step moves n / 2 (all-reduce on 4 ranks sharing 2 cores, ratio to
/// MPI_Allreduce's time, medians of 11-41 interleaved rounds in 4 runs: Rabenseifner vs ring
/// 0.80-1.16 vs 1.18-1.31 at 256 KiB, 0.83-1.12 vs 0.90-1.16 at 1 MiB, 1.14-1.18 vs 0.89-0.92
/// at 4 MiB).
inline constexpr std::size_t kRabenseifnerMaxBytes = 2 * 1024 * 1024;

/// True when all_reduce of `buffer` on `comm` uses rabenseifner_all_reduce: a power-of-two
/// group (is_butterfly_group) and a buffer that uses_large_all_reduce accepts
/// (ring_all_reduce.h) of fewer than kRabenseifnerMaxBytes; the others that
/// uses_large_all_reduce accepts take ring_all_reduce.
bool uses_rabenseifner_all_reduce(const Communicator& comm, const kernels::Buffer& buffer);

/// out[out_offset + j] = op over ranks of that rank's in[in_offset + c.offset + j] for
/// j < c.count, c = even_chunks(n, p, r) with r this rank and p = comm.size() a power of two
/// (avg: the sum). Recursive halving: for d = p/2, p/4, .., 1 rank r holds 2d chunks, sends the
/// d of them on rank r xor d's side to that rank and combines the other d with what arrives, the
/// lower rank's operand first; element i is therefore reduced as a butterfly over the rank bits,
/// highest bit first, the same on every run. `in` is not modified, except when `out` is `in` and
/// out_offset == in_offset + c.offset (all-reduce in place): then the partial sums are kept in
/// place. Host memory, one dtype. Each step waits through the deadline routine as `wait_op`.
/// Throws MpiError when an MPI call fails.
void halving_reduce_scatter(const Communicator& comm, const kernels::Buffer& in,
                            std::size_t in_offset, std::size_t n, kernels::Buffer& out,
                            std::size_t out_offset, ReduceOp op, const Operation& wait_op);

/// out[out_offset + c_q.offset + j] = rank q's in[in_offset + j] for j < c_q.count and every rank
/// q, c_q = even_chunks(n, p, q), p = comm.size() a power of two. Recursive doubling: in step
/// k = 0 .. log2(p) - 1 rank r exchanges the 2^k chunks it holds with rank r xor 2^k. This
/// rank's chunk is first copied into `out` (nothing to copy when `in` at in_offset is that chunk
/// of `out` already, the all-reduce in place), and step 0 sends it from `in`; transfers below
/// `eager_below` bytes travel as eager pieces (collective_steps.h). Host memory, one dtype. Each
/// step waits through the deadline routine as `wait_op`. Throws MpiError when an MPI call fails.
void doubling_all_gather(const Communicator& comm, const kernels::Buffer& in, std::size_t in_offset,
                         kernels::Buffer& out, std::size_t out_offset, std::size_t n,
                         std::size_t eager_below, const Operation& wait_op);

/// In place on every rank of `comm` (p = comm.size() a power of two): buffer[i] becomes op over
/// every rank's buffer[i] (avg: the sum; the caller scales). halving_reduce_scatter leaves chunk
/// r of [n] reduced on rank r, and doubling_all_gather copies every reduced chunk to every rank,
/// so every rank ends with the same bits: element i reduced in the butterfly order of
/// halving_reduce_scatter. Each step waits through the deadline routine as "all_reduce
/// (rabenseifner)". Throws MpiError when an MPI call fails.
void rabenseifner_all_reduce(const Communicator& comm, kernels::Buffer& buffer, ReduceOp op);

}  // namespace mpitron::comm
