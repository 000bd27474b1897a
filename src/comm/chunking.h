// How large transfers are cut into MPI messages whose element counts fit MPI's `int` counts
// (Open MPI 4 implements MPI-3.1, which has no large-count calls). Pure functions, unit-tested
// with counts above INT_MAX without allocating them.
#pragma once

#include <climits>
#include <cstddef>
#include <vector>

namespace mpitron::comm {

/// The most elements one MPI message carries by default: INT_MAX.
inline constexpr std::size_t kMaxMessageElements = INT_MAX;

/// A run of `count` consecutive elements starting at element `offset`.
struct Range {
  std::size_t offset = 0;
  std::size_t count = 0;
  bool operator==(const Range&) const = default;
};

/// Throws std::invalid_argument naming `limit` unless 1 <= limit <= INT_MAX (a message size
/// limit in elements).
void validate_message_limit(std::size_t limit);

/// Cuts [0, count) into consecutive ranges of at most `limit` elements, each full except the
/// last ([ceil(count / limit)] ranges; none for count 0). Throws std::invalid_argument when
/// `limit` is 0 or above INT_MAX.
std::vector<Range> split_count(std::size_t count, std::size_t limit = kMaxMessageElements);

/// The number of ranges split_count(count, limit) gives, ceil(count / limit), without building
/// them (the operations themselves allocate nothing per call). Same errors as split_count.
std::size_t message_count(std::size_t count, std::size_t limit);

/// Range `index` (< message_count(count, limit)) of split_count(count, limit).
Range message_range(std::size_t count, std::size_t limit, std::size_t index);

/// Chunks [first, first + count) of [0, n) cut into `parts` nearly equal consecutive chunks (the
/// first n % parts chunks one element longer than the rest), as one range: the layout of the
/// ring and recursive-halving all-reduce (ring_all_reduce.h, butterfly.h). Needs parts >= 1 and
/// first + count <= parts.
Range even_chunks(std::size_t n, std::size_t parts, std::size_t first, std::size_t count = 1);

/// A block of `rows` x `cols` elements at (`row`, `col`) of a row-major [outer, chunk] matrix.
struct Tile {
  std::size_t row = 0;
  std::size_t rows = 0;
  std::size_t col = 0;
  std::size_t cols = 0;
  bool operator==(const Tile&) const = default;
};

/// Covers a row-major [outer, chunk] matrix (one rank's share in all_gather / reduce_scatter)
/// with tiles of at most `limit` elements, in row-major order. When chunk <= limit each tile is
/// whole rows (floor(limit / chunk) of them, fewer in the last tile); otherwise each tile is one
/// row cut like `split_count(chunk, limit)`. A tile is therefore always contiguous in the
/// [outer, chunk] matrix. No tiles when outer or chunk is 0. Throws std::invalid_argument for
/// the same `limit` values as split_count.
std::vector<Tile> tile_matrix(std::size_t outer, std::size_t chunk,
                              std::size_t limit = kMaxMessageElements);

/// The number of tiles tile_matrix(outer, chunk, limit) gives, without building them.
std::size_t tile_count(std::size_t outer, std::size_t chunk, std::size_t limit);

/// Tile `index` (< tile_count(outer, chunk, limit)) of tile_matrix(outer, chunk, limit).
Tile tile_at(std::size_t outer, std::size_t chunk, std::size_t limit, std::size_t index);

}  // namespace mpitron::comm
