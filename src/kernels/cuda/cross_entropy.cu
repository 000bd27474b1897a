// Cross-entropy CUDA kernels on a vocabulary slice: per-row statistics one block per row, the
// loss (the counted rows' sum over a divisor) in one block, the logit gradient one thread per
// logit. Sums accumulate in double, as the CPU reference loops in cpu/cross_entropy.h do; the
// formulas and the ignore rule are shared (math.h).
#include <cmath>
#include <cstdint>

#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/math.h"

namespace mpitron::kernels::cuda {
namespace {

template <class T, class I>
__global__ void cross_entropy_rows(const T* logits, std::size_t cols, std::size_t used_cols,
                                   const I* targets, std::int64_t first_col, const T* row_max,
                                   T* sum_exp, T* target_logit) {
  using std::exp;
  const std::size_t r = blockIdx.x;
  const T* lr = logits + r * cols;
  double total = 0.0;
  for (std::size_t c = threadIdx.x; c < used_cols; c += blockDim.x)
    total += exp(lr[c] - row_max[r]);
  total = block_reduce(total, Plus{}, 0.0);
  if (threadIdx.x == 0) {
    sum_exp[r] = static_cast<T>(total);
    const std::int64_t col = math::slice_row(targets[r], first_col, used_cols);
    target_logit[r] = col < 0 ? T(0) : lr[col];
  }
}

}  // namespace

template <class T, class I>
void Kernels::cross_entropy_stats(const T* logits, std::size_t rows, std::size_t cols,
                                  std::size_t used_cols, const I* targets, std::int64_t first_col,
                                  const T* row_max, T* sum_exp, T* target_logit) {
  cross_entropy_rows<<<row_blocks(rows), kRowThreads>>>(logits, cols, used_cols, targets, first_col,
                                                        row_max, sum_exp, target_logit);
  MPITRON_CUDA_CHECK(cudaGetLastError());
}

template <class T, class I>
void Kernels::cross_entropy_loss(const T* row_max, const T* sum_exp, const T* target_logit,
                                 const I* targets, std::size_t rows, double divisor, T* loss) {
  auto term = [=] __device__(std::size_t r) {
    return math::cross_entropy_term(row_max[r], sum_exp[r], target_logit[r], targets[r]);
  };
  auto finish = [=] __device__(double total) { return math::cross_entropy_scaled(total, divisor); };
  launch_reduce_then(rows, term, finish, loss);
}

template <class T, class I>
void Kernels::cross_entropy_backward(const T* logits, std::size_t rows, std::size_t cols,
                                     std::size_t used_cols, const I* targets,
                                     std::int64_t first_col, const T* row_max, const T* sum_exp,
                                     const T* dloss, double divisor, T* dlogits) {
  for_each(rows * cols, [=] __device__(std::size_t i) {
    const std::size_t r = i / cols, c = i % cols;
    const std::int64_t target = math::slice_row(targets[r], first_col, used_cols);
    const T coef = static_cast<T>(math::cross_entropy_scaled(dloss[0], divisor));
    dlogits[i] = c < used_cols && math::counts_target(targets[r])
                     ? math::cross_entropy_grad(logits[i], row_max[r], sum_exp[r],
                                                static_cast<std::int64_t>(c) == target, coef)
                     : T(0);
  });
}

#define MPITRON_INSTANTIATE(T, I)                                                                 \
  template void Kernels::cross_entropy_stats<T, I>(                                               \
      const T*, std::size_t, std::size_t, std::size_t, const I*, std::int64_t, const T*, T*, T*); \
  template void Kernels::cross_entropy_loss<T, I>(const T*, const T*, const T*, const I*,         \
                                                  std::size_t, double, T*);                       \
  template void Kernels::cross_entropy_backward<T, I>(const T*, std::size_t, std::size_t,         \
                                                      std::size_t, const I*, std::int64_t,        \
                                                      const T*, const T*, const T*, double, T*);
MPITRON_INSTANTIATE(float, std::int32_t)
MPITRON_INSTANTIATE(float, std::int64_t)
MPITRON_INSTANTIATE(double, std::int32_t)
MPITRON_INSTANTIATE(double, std::int64_t)
#undef MPITRON_INSTANTIATE

}  // namespace mpitron::kernels::cuda
