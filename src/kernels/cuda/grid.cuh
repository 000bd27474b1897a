// Internal: the building blocks of mpitron's CUDA kernels: a grid-stride loop over indices, a
// block-wide reduction, a one-block reduction to a scalar and the grid of one-block-per-row
// kernels.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/cuda/check.h"

namespace mpitron::kernels::cuda {

inline constexpr unsigned kThreads = 256;        // threads per block of the element-wise loops
inline constexpr std::size_t kMaxBlocks = 8192;  // enough to fill a GPU; the loop strides on

template <class F>
__global__ void for_each_index(std::size_t n, F f) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    f(i);
  }
}

/// Runs the device callable f(i) for every i in [0, n) on the default stream; n > 0.
template <class F>
void for_each(std::size_t n, F f) {
  const std::size_t blocks = std::min((n + kThreads - 1) / kThreads, kMaxBlocks);
  for_each_index<<<static_cast<unsigned>(blocks), kThreads>>>(n, f);
  MPITRON_CUDA_CHECK(cudaGetLastError());
}

struct Plus {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

struct Larger {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};

/// Combines every thread's `value` with `op` and returns the result to every thread of the
/// block. blockDim.x must be a multiple of 32 (at most 1024); `identity` fills the lanes of
/// warps the block does not have. Warp shuffles first, then one value per warp in shared memory.
template <class T, class Op>
__device__ T block_reduce(T value, Op op, T identity) {
  __shared__ T partial[32];
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) {
    value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
  }
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < blockDim.x / 32 ? partial[lane] : identity;
    for (int offset = 16; offset > 0; offset /= 2) {
      value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
    }
    if (lane == 0) partial[0] = value;
  }
  __syncthreads();
  const T result = partial[0];
  __syncthreads();  // the next call may overwrite `partial`
  return result;
}

inline constexpr unsigned kReduceThreads = 1024;  // one block sums a whole buffer
inline constexpr unsigned kRowThreads = 256;      // one block per softmax row

/// out[0] = finish(sum_i term(i)), the sum in double, by a single block.
template <class T, class Term, class Finish>
__global__ void reduce_to_scalar(std::size_t n, Term term, Finish finish, T* out) {
  double acc = 0.0;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x)
    acc += term(i);
  acc = block_reduce(acc, Plus{}, 0.0);
  if (threadIdx.x == 0) out[0] = static_cast<T>(finish(acc));
}

/// launch_reduce's last step: the sum over a fixed divisor.
struct DivideBy {
  double divisor;
  __device__ double operator()(double total) const { return total / divisor; }
};

/// out[0] = finish(sum_i term(i)) (reduce_to_scalar on the current stream).
template <class T, class Term, class Finish>
void launch_reduce_then(std::size_t n, Term term, Finish finish, T* out) {
  reduce_to_scalar<<<1, kReduceThreads>>>(n, term, finish, out);
  MPITRON_CUDA_CHECK(cudaGetLastError());
}

/// out[0] = sum_i term(i) / divisor.
template <class T, class Term>
void launch_reduce(std::size_t n, Term term, double divisor, T* out) {
  launch_reduce_then(n, term, DivideBy{divisor}, out);
}

/// The grid of a one-block-per-row kernel.
inline unsigned row_blocks(std::size_t rows) {
  if (rows > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw std::invalid_argument("kernels: " + std::to_string(rows) + " rows exceed one CUDA grid");
  }
  return static_cast<unsigned>(rows);
}

}  // namespace mpitron::kernels::cuda
