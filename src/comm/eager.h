// The sizes below which transfers are cut into pieces that Open MPI's shared-memory transport
// sends eagerly (communication layer internal; used by the collectives' steps and by
// point-to-point transfers).
#pragma once

#include <cstddef>

namespace mpitron::comm {

/// Transfers below this many bytes travel as messages of at most kEagerMessageBytes. Open MPI's
/// shared-memory transport sends a message of up to 4 KiB, including its match header, eagerly
/// (btl_vader_eager_limit); a larger one takes a rendezvous and a process_vm_readv single copy.
/// On 2 ranks of a Zen 4 (bench comm and a loop of all_reduce calls) eager pieces made a 4 KiB
/// exchange about 4x faster and 16-240 KB ones 1.1-2x faster; from 512 KiB on the single copy
/// wins (pieces took 1.2-1.5x as long), and 128 KiB was even.
inline constexpr std::size_t kEagerPiecesBelowBytes = 256 * 1024;

/// kEagerPiecesBelowBytes for transfers of data the sender has not just written (all_gather's
/// blocks, every step). All-gather, eager pieces against one single-copy message per transfer
/// (ratio to MPI_Allgather's time, median of 31-41 interleaved rounds): 2 ranks, 32 KiB
/// transfers 0.88 vs 1.08, 64 KiB 1.06 vs 1.05, 128 KiB 1.21 vs 1.02; 4 ranks, 128 KiB
/// all-gather (32 KiB transfers, then 64 KiB) 1.01 with this limit for every step vs 1.23 with
/// 32 KiB for the first and kEagerPiecesBelowBytes for the next, 256 KiB 1.04 vs 1.08. A
/// just-reduced chunk (all_reduce, reduce_scatter) gains from pieces up to
/// kEagerPiecesBelowBytes, since the peer's single-copy read would pull it out of the sender's
/// cache.
inline constexpr std::size_t kEagerPiecesBelowBytesForCopies = 64 * 1024;

/// The largest piece of a transfer below kEagerPiecesBelowBytes.
inline constexpr std::size_t kEagerMessageBytes = 4000;

}  // namespace mpitron::comm
