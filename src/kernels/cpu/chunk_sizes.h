// The sizes that cut the CPU kernels' work into chunks (parallel.h): fixed numbers of elements,
// never derived from the thread count, so every result has the same bits at any count.
#pragma once

#include <cstddef>

namespace mpitron::kernels::cpu {

/// Elements per chunk of an element-wise loop: 16 Ki (64 KiB of float32 per operand), a multiple
/// of every vector width, so each chunk but the last is whole vectors.
inline constexpr std::size_t kElementChunk = 16384;

/// Elements per block of a blocked sum (sum, sum_squares, mse_forward): 16 Ki.
inline constexpr std::size_t kSumBlock = 16384;

}  // namespace mpitron::kernels::cpu
