// Internal: the per-row math of the fused attention kernels (kernels::attention_forward and
// attention_backward), shared by the CPU loops (cpu/attention.h) and the CUDA kernel
// (cuda/attention.cu), so the CPU tests run the CUDA kernel's arithmetic. The scheme is
// FlashAttention's (Dao et al. 2022, arXiv:2205.14135, Algorithm 1: online softmax over key
// blocks, saving the row's log-sum-exp) with FlashAttention-2's backward (Dao 2023,
// arXiv:2307.08691, Algorithm 2: P recomputed from the log-sum-exp, dS = P (dP - D) with
// D = rowsum(dO * O)).
#pragma once

#include <cmath>
#include <cstddef>
#include <type_traits>

#include "kernels/bf16.h"
#include "kernels/math.h"

namespace mpitron::kernels::math {

/// -inf in T, usable in device code (INFINITY is a constant expression there too).
template <class T>
MPITRON_HOST_DEVICE inline T negative_infinity() {
  return -static_cast<T>(INFINITY);
}

/// x as a product of the fused attention multiplies it when q, k and v are `In`: under bfloat16
/// inputs (train --bf16) the probabilities P, the score gradients dS and dO are rounded to
/// bfloat16 (to nearest even) before their products with v, k, q or each other, as
/// FlashAttention-2's bfloat16 kernels round them (Dao 2023, arXiv:2307.08691, sec. 3); the
/// products then sum in float32. x itself for any other In.
template <class In, class T>
MPITRON_HOST_DEVICE inline T attention_operand(T x) {
  if constexpr (std::is_same_v<In, bf16>) {
    return bf16_to_float(to_bf16(x));
  } else {
    return x;
  }
}

/// Whether key position j is hidden from query position i: with `causal`, every j > i is.
MPITRON_HOST_DEVICE inline bool attention_masked(std::size_t i, std::size_t j, bool causal) {
  return causal && j > i;
}

/// The first step of folding a block of one query row's scores into its online softmax: with
/// `s` the block's n scaled scores (masked ones -inf) and `running_max` the row's max so far
/// (-inf before the first block), raises running_max to include the block, turns s[c] into
/// exp(s[c] - running_max) (0 for masked entries), stores their sum in `block_sum` and returns
/// the factor alpha = exp(old max - new max) by which the row's sum and output, accumulated
/// against the old max, must be scaled (online_softmax_rescale). alpha is 1 while the max stays;
/// a row with no visible score yet keeps max -inf, probabilities 0 and alpha 1 (no NaN). `exp`
/// is e^x for x in [-inf, 0] (exp(-inf) = 0); the sum is lane_sum's, after all the exponentials.
template <class T, class Exp = LibraryExp>
MPITRON_HOST_DEVICE inline T online_softmax_block(T* s, std::size_t n, T& running_max, T& block_sum,
                                                  Exp exp = {}) {
  const T block_max = lane_max(s, n, negative_infinity<T>());
  const T new_max = block_max > running_max ? block_max : running_max;
  block_sum = T(0);
  if (new_max == negative_infinity<T>()) {
    for (std::size_t c = 0; c < n; ++c)
      s[c] = T(0);
    return T(1);
  }
  const T alpha = exp(running_max - new_max);  // exp(-inf) = 0 on the first visible block
  running_max = new_max;
  for (std::size_t c = 0; c < n; ++c)
    s[c] = exp(s[c] - new_max);
  block_sum = lane_sum<T>(n, [s](std::size_t c) { return s[c]; });
  return alpha;
}

/// The second step: running_sum = alpha running_sum + block_sum, and the row's output
/// accumulator out[0, d) (sum_j p_j v_j against the old max) scaled by alpha, before the caller
/// adds the block's p v.
template <class T>
MPITRON_HOST_DEVICE inline void online_softmax_rescale(T alpha, T block_sum, T& running_sum, T* out,
                                                       std::size_t d) {
  running_sum = alpha * running_sum + block_sum;
  for (std::size_t x = 0; x < d; ++x)
    out[x] *= alpha;
}

/// The row's log-sum-exp of the scaled scores, max + log(sum), saved for backward.
template <class T>
MPITRON_HOST_DEVICE inline T online_softmax_lse(T running_max, T running_sum) {
  using std::log;
  return running_max + log(running_sum);
}

/// The probability p = exp(s - lse) of a scaled score recomputed in backward (0 when masked:
/// s = -inf), with `exp` as in online_softmax_block.
template <class T, class Exp = LibraryExp>
MPITRON_HOST_DEVICE inline T attention_probability(T s, T lse, Exp exp = {}) {
  return exp(s - lse);
}

/// D = rowsum(dO * O) = sum_x dout[x] out[x] of one query row (lane_sum in double): the
/// softmax backward's row dot product sum_j P_j dP_j, from d numbers instead of seq. out is T,
/// or bfloat16 (train --bf16's kept output, widened exactly).
template <class T, class Out>
MPITRON_HOST_DEVICE inline T attention_delta(const T* dout, const Out* out, std::size_t d) {
  return static_cast<T>(lane_sum<double>(d, [dout, out](std::size_t x) {
    return static_cast<double>(dout[x]) * static_cast<double>(widen(out[x]));
  }));
}

/// The score gradient dS = P (dP - D) of one entry (the softmax backward), with dP = dO v_j.
/// The caller multiplies by the scale when it forms dQ = scale dS K and dK = scale dS^T Q.
template <class T>
MPITRON_HOST_DEVICE inline T attention_score_grad(T p, T dp, T delta) {
  return p * (dp - delta);
}

/// Folds one block's partial attention into a query row's running result (the log-sum-exp merge
/// of blockwise softmax that ring attention runs between the blocks of keys it receives; Liu et
/// al., arXiv:2310.01889, and Milakov & Gimelshein, arXiv:1805.02867): `o` [d] and `lse` are the
/// row's output normalized over the keys seen so far and their log-sum-exp, block_o [d] and
/// block_lse the same over the block's keys. Afterwards lse = log(e^lse + e^block_lse) and
/// o = e^(lse_old - lse) o + e^(block_lse - lse) block_o. A side with lse -inf (no key seen)
/// contributes nothing; both -inf leaves o and lse as they were.
template <class T>
MPITRON_HOST_DEVICE inline void attention_merge_row(T* o, T& lse, const T* block_o, T block_lse,
                                                    std::size_t d) {
  using std::exp;
  using std::log1p;
  if (block_lse == negative_infinity<T>()) return;
  if (lse == negative_infinity<T>()) {
    for (std::size_t x = 0; x < d; ++x)
      o[x] = block_o[x];
    lse = block_lse;
    return;
  }
  const T high = lse > block_lse ? lse : block_lse;
  const T low = lse > block_lse ? block_lse : lse;
  const T merged = high + log1p(exp(low - high));
  const T keep = exp(lse - merged), take = exp(block_lse - merged);
  for (std::size_t x = 0; x < d; ++x)
    o[x] = keep * o[x] + take * block_o[x];
  lse = merged;
}

}  // namespace mpitron::kernels::math
