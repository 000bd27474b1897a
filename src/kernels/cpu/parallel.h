// How the CPU kernels split work over cpu_threads() OpenMP threads, so that every result is the
// same bits for any thread count: ranges are cut into chunks whose bounds depend only on the
// sizes (never on the thread count), each chunk is computed exactly as one thread computes it,
// and reductions combine their per-block partial sums in block order. At one thread (or one
// chunk) the body runs on the calling thread without entering an OpenMP region.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/chunk_sizes.h"
#include "kernels/math.h"
#include "kernels/ops.h"

namespace mpitron::kernels::cpu {

/// Calls body(begin, end) for the chunks [c * grain, min(n, (c + 1) * grain)) of [0, n), on up
/// to cpu_threads() threads (OpenMP static schedule); all of [0, n) in one call when one thread
/// or one chunk. `body` must write only its own chunk's
/// outputs. grain >= 1.
template <class Body>
void parallel_chunks(std::size_t n, std::size_t grain, Body body) {
  const std::size_t chunks = (n + grain - 1) / grain;
  const int threads = cpu_threads();
  if (threads == 1 || chunks <= 1) {
    body(std::size_t{0}, n);
    return;
  }
  const auto count = static_cast<std::int64_t>(chunks);
#pragma omp parallel for num_threads(static_cast <int>(std::min <std::size_t>(threads, chunks))) \
    schedule(static)
  for (std::int64_t c = 0; c < count; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * grain;
    body(begin, std::min(n, begin + grain));
  }
}

/// Calls body(r) for every row r < rows, rows grouped so that a chunk holds about
/// kElementChunk elements of `cols` each (at least one row). Rows are independent, so the
/// grouping changes nothing in the results.
template <class Body>
void parallel_rows(std::size_t rows, std::size_t cols, Body body) {
  const std::size_t grain =
      std::max<std::size_t>(1, kElementChunk / std::max<std::size_t>(cols, 1));
  parallel_chunks(rows, grain, [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r)
      body(r);
  });
}

/// Columns per block of a column-sum kernel (sum_rows, LayerNorm's dweight and dbias): 64, whose
/// double accumulators fit on the stack.
inline constexpr std::size_t kColumnBlock = 64;

/// Calls body(c0, width) for the column blocks [c0, c0 + width) of [0, cols), width =
/// kColumnBlock but the last, one block per thread at a time. Each column is summed by one call,
/// so the results do not depend on the thread count. A whole block's width comes as
/// std::integral_constant (body takes `auto width`), so the compiler vectorizes its loops over
/// the block's columns at full width; the last, narrower block's as std::size_t.
template <class Body>
void parallel_column_blocks(std::size_t cols, Body body) {
  parallel_chunks(cols, kColumnBlock, [&](std::size_t begin, std::size_t end) {
    for (std::size_t c0 = begin; c0 < end; c0 += kColumnBlock) {
      if (end - c0 >= kColumnBlock) {
        body(c0, std::integral_constant<std::size_t, kColumnBlock>{});
      } else {
        body(c0, end - c0);
      }
    }
  });
}

/// sum_{i < n} term(i) in double: each block of kSumBlock terms summed by math::lane_sum, then
/// the block sums in block order: the same order, so the same bits, for any thread count.
template <class Term>
double blocked_sum(std::size_t n, Term term) {
  const auto block_sum = [&](std::size_t begin, std::size_t end) {
    return math::lane_sum<double>(end - begin, [&](std::size_t i) { return term(begin + i); });
  };
  const std::size_t blocks = (n + kSumBlock - 1) / kSumBlock;
  if (blocks <= 1) return block_sum(0, n);
  std::vector<double> partial(blocks);
  parallel_chunks(n, kSumBlock, [&](std::size_t begin, std::size_t end) {
    for (std::size_t b = begin; b < end; b += kSumBlock)
      partial[b / kSumBlock] = block_sum(b, std::min(end, b + kSumBlock));
  });
  double total = 0.0;
  for (const double p : partial)
    total += p;
  return total;
}

}  // namespace mpitron::kernels::cpu
