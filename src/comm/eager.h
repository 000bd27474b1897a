// The sizes below which transfers are cut into pieces that Open MPI's shared-memory transport
// sends eagerly (communication layer internal; used by the collectives' steps and by
// point-to-point transfers).
#pragma once

#include <cstddef>

namespace mpitron::comm {

/// Transfers below this many bytes that their receiver combines with its own data (all_reduce,
/// reduce_scatter) travel as messages of at most kEagerMessageBytes. Open MPI's shared-memory
/// transport sends a message of up to 4 KiB, including its match header, eagerly
/// (btl_vader_eager_limit); a larger one takes a rendezvous and a process_vm_readv single copy.
/// Pieces made a 4 KiB exchange about 4x faster and 16-64 KB ones 1.1-2x faster on 2 ranks of a
/// Zen 4. A stream of pieces needs its receiver running to drain it, though: with pieces up to
/// 256 KiB, on 2026-12-03 (5 interleaved runs of bench comm) all-reduce of 256 KiB (128 KiB
/// transfers) took 1.12x MPI's time on 4 ranks sharing 2 cores against 1.04x as one single copy,
/// and reduce-scatter of 256 KiB 0.55x and 1.04x on 2 and 4 ranks against 0.32x and 0.81x.
inline constexpr std::size_t kEagerPiecesBelowBytes = 64 * 1024;

/// kEagerPiecesBelowBytes for transfers that are copied as they are (all_gather's blocks and
/// point-to-point payloads): the peer's single-copy read then takes data the sender has not
/// just written, so the pieces win less. All-gather of 64 KiB on 2 ranks (one 32 KiB transfer),
/// 5 interleaved runs on 2026-12-03: 1.48x [1.37-1.62] MPI's time as pieces, 1.03x [1.00-1.05]
/// as one single copy; on 4 ranks 0.85x and 0.98x. Send/recv of 64 KiB as pieces took 0.74x on
/// 2 ranks but 1.33x on 4 ranks sharing 2 cores and 1.22-1.34x with both ranks on one core,
/// against 1.04-1.10x as one single copy (docs/performance.md).
inline constexpr std::size_t kEagerPiecesBelowBytesForCopies = 32 * 1024;

/// The largest piece of a transfer that travels as eager pieces (below kEagerPiecesBelowBytes, or
/// kEagerPiecesBelowBytesForCopies for copies and point-to-point payloads).
inline constexpr std::size_t kEagerMessageBytes = 4000;

}  // namespace mpitron::comm
