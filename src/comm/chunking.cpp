#include "comm/chunking.h"

#include "kernels/fault_injection.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mpitron::comm {

void validate_message_limit(std::size_t limit) {
  if (limit == 0 || limit > kMaxMessageElements) {
    throw std::invalid_argument("message element limit must be in [1, INT_MAX], got " +
                                std::to_string(limit));
  }
}

std::size_t message_count(std::size_t count, std::size_t limit) {
  validate_message_limit(limit);
  if (kernels::fault_active(kernels::Fault::chunk_tail_dropped) && count > limit)
    return count / limit;
  return count / limit + (count % limit != 0 ? 1 : 0);
}

Range message_range(std::size_t count, std::size_t limit, std::size_t index) {
  const std::size_t offset = index * limit;
  return {offset, std::min(limit, count - offset)};
}

std::vector<Range> split_count(std::size_t count, std::size_t limit) {
  std::vector<Range> ranges(message_count(count, limit));
  for (std::size_t i = 0; i < ranges.size(); ++i)
    ranges[i] = message_range(count, limit, i);
  return ranges;
}

Range even_chunks(std::size_t n, std::size_t parts, std::size_t first, std::size_t count) {
  const std::size_t base = n / parts, extra = n % parts;
  const auto start = [&](std::size_t c) { return c * base + std::min(c, extra); };
  return {start(first), start(first + count) - start(first)};
}

std::size_t tile_count(std::size_t outer, std::size_t chunk, std::size_t limit) {
  validate_message_limit(limit);
  if (outer == 0 || chunk == 0) return 0;
  if (chunk <= limit) return message_count(outer, limit / chunk);
  return outer * message_count(chunk, limit);
}

Tile tile_at(std::size_t outer, std::size_t chunk, std::size_t limit, std::size_t index) {
  if (chunk <= limit) {
    const Range rows = message_range(outer, limit / chunk, index);
    return {rows.offset, rows.count, 0, chunk};
  }
  const std::size_t pieces = message_count(chunk, limit);
  const Range cols = message_range(chunk, limit, index % pieces);
  return {index / pieces, 1, cols.offset, cols.count};
}

std::vector<Tile> tile_matrix(std::size_t outer, std::size_t chunk, std::size_t limit) {
  std::vector<Tile> tiles(tile_count(outer, chunk, limit));
  for (std::size_t i = 0; i < tiles.size(); ++i)
    tiles[i] = tile_at(outer, chunk, limit, i);
  return tiles;
}

}  // namespace mpitron::comm
