// all_gather and reduce_scatter: the two collectives between a per-rank [outer, chunk] buffer
// and the full [outer, size*chunk] buffer ("wide" layout, rank r's columns at r*chunk).
//
// MPI moves rank-major data ([size, rows, cols], each rank's part contiguous). Each tile of the
// per-rank matrix (see tile_matrix) is moved by one collective (a ring of point-to-point messages
// for host memory, p2p_gather_scatter.h, else one MPI call); when the tile's rank-major form is
// not already laid out inside the wide buffer it is reordered through a pack workspace with
// kernels::copy_rows.
#include <stdexcept>

#include "comm/algorithm_choice.h"
#include "comm/blocking_call.h"
#include "comm/collectives.h"
#include "comm/errors.h"
#include "comm/mpi_util.h"
#include "comm/p2p_gather_scatter.h"
#include "comm/staging.h"
#include "comm/traffic.h"
#include "kernels/fault_injection.h"
#include "kernels/ops.h"

namespace mpitron::comm {

using kernels::Buffer;

namespace {

std::string describe(const Buffer& buffer) {
  return std::to_string(buffer.numel()) + " " + kernels::to_string(buffer.dtype()) + " on " +
         kernels::to_string(buffer.device());
}

// Checks the [outer, chunk] per-rank buffer against the [outer, size*chunk] full buffer and
// returns chunk.
std::size_t checked_chunk(const std::string& op, const Communicator& comm, const Buffer& part,
                          const Buffer& full, std::size_t outer) {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(op + " on the " + comm.name() + " communicator: " + why);
  };
  if (part.dtype() != full.dtype() || part.device() != full.device()) {
    fail("the per-rank buffer (" + describe(part) + ") and the full buffer (" + describe(full) +
         ") differ in dtype or device");
  }
  if (outer == 0 || part.numel() % outer != 0) {
    fail("outer = " + std::to_string(outer) + " does not divide the per-rank buffer of " +
         std::to_string(part.numel()) + " elements");
  }
  const std::size_t size = static_cast<std::size_t>(comm.size());
  if (full.numel() != size * part.numel()) {
    fail("the full buffer has " + std::to_string(full.numel()) + " elements, expected " +
         std::to_string(size) + " ranks x " + std::to_string(part.numel()) + " = " +
         std::to_string(size * part.numel()));
  }
  return part.numel() / outer;
}

struct WideLayout {
  std::size_t size;   // ranks
  std::size_t chunk;  // columns per rank

  // Element offset in the wide buffer of rank r's part of `tile`.
  std::size_t offset(const Tile& tile, std::size_t r) const {
    return tile.row * size * chunk + r * chunk + tile.col;
  }

  // True when the tile's rank-major form is already contiguous at offset(tile, 0).
  bool rank_major_in_place(const Tile& tile) const {
    return size == 1 || (tile.rows == 1 && tile.cols == chunk);
  }
};

enum class Direction { to_wide, to_rank_major };

// Copies one tile between its rank-major form (`packed`, [size, rows, cols]) and its place in
// the wide buffer, then waits for the copies so MPI may use the memory.
void move_tile(const Buffer& src, Buffer& dst, const Tile& tile, const WideLayout& wide,
               Direction direction) {
  const std::size_t wide_stride = wide.size * wide.chunk;
  for (std::size_t r = 0; r < wide.size; ++r) {
    const std::size_t packed = r * tile.rows * tile.cols;
    if (direction == Direction::to_wide) {
      const bool reversed = kernels::fault_active(kernels::Fault::all_gather_rank_order_reversed);
      kernels::copy_rows(src, packed, tile.cols, dst,
                         wide.offset(tile, reversed ? wide.size - 1 - r : r), wide_stride,
                         tile.rows, tile.cols);
    } else {
      kernels::copy_rows(src, wide.offset(tile, r), wide_stride, dst, packed, tile.cols, tile.rows,
                         tile.cols);
    }
  }
  kernels::synchronize(dst.device());
}

// The shared frame of both operations: checks the [outer, chunk] `part` against the
// [outer, size*chunk] `full` buffer, stages `in` and `out` for MPI, calls
// `per_tile(tile, wide, src, dst)` for each tile (it moves the tile and waits for it) and
// completes the write of `out`.
template <class PerTile>
void run_tiled(const std::string& op, const Communicator& comm, const Buffer& in, Buffer& out,
               const Buffer& part, const Buffer& full, std::size_t outer, PerTile per_tile) {
  const std::size_t chunk = checked_chunk(op, comm, part, full, outer);
  if (part.empty()) return;
  const WideLayout wide{static_cast<std::size_t>(comm.size()), chunk};
  const Buffer& src = stage_in(comm, in, Slot::send);
  Buffer& dst = stage_target(comm, out, Slot::recv);
  const std::size_t limit = comm.max_message_elements();
  const std::size_t tiles = tile_count(outer, chunk, limit);
  for (std::size_t i = 0; i < tiles; ++i)
    per_tile(tile_at(outer, chunk, limit, i), wide, src, dst);
  stage_out(dst, out);
}

// The deadline description of one tile's MPI call.
Operation tile_operation(std::string_view what, const WideLayout& wide, const Tile& tile,
                         const Buffer& like) {
  return {what, -1, wide.size * tile.rows * tile.cols * kernels::dtype_size(like.dtype())};
}

}  // namespace

void all_gather(const Communicator& comm, const Buffer& in, Buffer& out, std::size_t outer) {
  count_traffic(comm, in.bytes());
  run_tiled("all_gather", comm, in, out, in, out, outer,
            [&](const Tile& tile, const WideLayout& wide, const Buffer& src, Buffer& dst) {
              const int count = mpi_count(tile.rows * tile.cols);
              const bool in_place =
                  wide.rank_major_in_place(tile) &&
                  !kernels::fault_active(kernels::Fault::all_gather_rank_order_reversed);
              Buffer& gathered =
                  in_place ? dst : pack_workspace(comm, out, wide.size * tile.rows * tile.cols);
              const std::size_t src_offset = tile.row * wide.chunk + tile.col;
              const std::size_t gathered_offset = in_place ? wide.offset(tile, 0) : 0;
              const Operation operation = tile_operation("all_gather", wide, tile, in);
              const Algorithm algorithm = all_gather_algorithm(
                  comm, src.device(), tile.rows * tile.cols * kernels::dtype_size(in.dtype()));
              if (algorithm != Algorithm::mpi) {
                p2p_all_gather(comm, src, src_offset, gathered, gathered_offset,
                               tile.rows * tile.cols, algorithm, operation);
              } else if (src.device() == kernels::Device::cpu) {
                blocking_call(comm, operation, "MPI_Allgather", [&] {
                  return MPI_Allgather(element(src, src_offset), count, mpi_type(in.dtype()),
                                       element(gathered, gathered_offset), count,
                                       mpi_type(in.dtype()), comm.native());
                });
              } else {
                MPI_Request request = MPI_REQUEST_NULL;
                check_mpi(MPI_Iallgather(element(src, src_offset), count, mpi_type(in.dtype()),
                                         element(gathered, gathered_offset), count,
                                         mpi_type(in.dtype()), comm.native(), &request),
                          "MPI_Iallgather");
                wait_one(comm, request, operation);
              }
              if (!in_place) move_tile(gathered, dst, tile, wide, Direction::to_wide);
            });
}

void reduce_scatter(const Communicator& comm, const Buffer& in, Buffer& out, std::size_t outer,
                    ReduceOp op) {
  count_traffic(comm, in.bytes());
  run_tiled("reduce_scatter", comm, in, out, out, in, outer,
            [&](const Tile& tile, const WideLayout& wide, const Buffer& src, Buffer& dst) {
              const MPI_Op reduction = reduction_op(comm, in, op);  // throws for avg of integers
              const Buffer* packed = &src;
              std::size_t packed_offset = wide.offset(tile, 0);
              if (!wide.rank_major_in_place(tile)) {
                Buffer& pack = pack_workspace(comm, in, wide.size * tile.rows * tile.cols);
                move_tile(src, pack, tile, wide, Direction::to_rank_major);
                packed = &pack;
                packed_offset = 0;
              }
              const std::size_t dst_offset = tile.row * wide.chunk + tile.col;
              const Operation operation = tile_operation("reduce_scatter", wide, tile, in);
              const std::size_t count = tile.rows * tile.cols;
              const Algorithm algorithm = reduce_scatter_algorithm(
                  comm, in, wide.size * count * kernels::dtype_size(in.dtype()));
              if (algorithm != Algorithm::mpi) {
                p2p_reduce_scatter(comm, *packed, packed_offset, dst, dst_offset, count, op,
                                   algorithm, operation);
                return;
              }
              if (uses_p2p_reduce_scatter(comm, in)) {  // a host buffer MPI reads in place
                blocking_call(comm, operation, "MPI_Reduce_scatter_block", [&] {
                  return MPI_Reduce_scatter_block(element(*packed, packed_offset),
                                                  element(dst, dst_offset), mpi_count(count),
                                                  mpi_type(in.dtype()), reduction, comm.native());
                });
                return;
              }
              MPI_Request request = MPI_REQUEST_NULL;
              check_mpi(MPI_Ireduce_scatter_block(
                            element(*packed, packed_offset), element(dst, dst_offset),
                            mpi_count(tile.rows * tile.cols), mpi_type(in.dtype()), reduction,
                            comm.native(), &request),
                        "MPI_Ireduce_scatter_block");
              wait_one(comm, request, operation);
            });
  finish_average(comm, out, op);
}

}  // namespace mpitron::comm
