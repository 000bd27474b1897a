// The fused attention on CUDA, written plainly: one thread block of kBlock threads per (query or
// key block, batch*head), one thread per query (forward, dQ) or key (dK, dV) row, the other
// side's blocks staged in shared memory. The per-row math is kernels/attention_math.h, the same
// functions the CPU loops (cpu/attention.h) run. A thread accumulates its own output row in
// global memory, so every element has one writer and no atomics are needed. Bfloat16 q, k, v and
// o (In) are widened exactly as they are read or staged, and P, dS and dO are rounded to bfloat16
// where they enter a product (math::attention_operand), as on the CPU.
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/attention_math.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/kernels.h"

namespace mpitron::kernels::cuda {
namespace {

constexpr std::size_t kBlock = 64;  // rows per block on either side, and threads per block

/// The smaller of two sizes (std::min is host-only).
__device__ std::size_t smaller(std::size_t a, std::size_t b) {
  return a < b ? a : b;
}

/// a . b over d elements, in T (each of a and b T or bfloat16).
template <class T, class A, class B>
__device__ T dot(const A* a, const B* b, std::size_t d) {
  T acc = T(0);
  for (std::size_t x = 0; x < d; ++x)
    acc += static_cast<T>(widen(a[x])) * static_cast<T>(widen(b[x]));
  return acc;
}

/// Copies rows [first, first + rows) of a [seq, d] slice into shared memory in T, block-wide,
/// each element as the products read it when q, k and v are `Operand` (math::attention_operand).
template <class T, class In, class Operand = In>
__device__ void stage_rows(const In* m, std::size_t first, std::size_t rows, std::size_t d,
                           T* shared) {
  for (std::size_t e = threadIdx.x; e < rows * d; e += blockDim.x)
    shared[e] = math::attention_operand<Operand>(static_cast<T>(widen(m[first * d + e])));
}

/// What thread t of block (slice, query block) of a query-side kernel works on: query row
/// i = i0 + t of the slice at element `slice` (active when i < seq; the block has `rows` rows),
/// and the key and value blocks it stages in the `shared` bytes.
template <class T>
struct QueryRow {
  T *k_block, *v_block;
  std::size_t slice, i0, i, rows;
  bool active;

  __device__ QueryRow(unsigned char* shared, std::size_t seq, std::size_t d)
      : k_block(reinterpret_cast<T*>(shared)),
        v_block(k_block + kBlock * d),
        slice(blockIdx.x * seq * d),
        i0(blockIdx.y * kBlock),
        i(i0 + threadIdx.x),
        rows(smaller(kBlock, seq - i0)),
        active(i < seq) {}
};

/// Thread t of block (slice, query block) computes query row i = i0 + t.
template <class T, class In>
__global__ void forward_rows(const In* q, const In* k, const In* v, std::size_t seq, std::size_t d,
                             bool causal, T scale, T* o, T* lse) {
  extern __shared__ unsigned char shared_bytes[];
  const QueryRow<T> row(shared_bytes, seq, d);
  T* out = o + row.slice + row.i * d;
  if (row.active) {
    for (std::size_t x = 0; x < d; ++x)
      out[x] = T(0);
  }
  T max = math::negative_infinity<T>(), sum = T(0);
  T p[kBlock];
  const std::size_t key_end = causal ? row.i0 + row.rows : seq;
  for (std::size_t j0 = 0; j0 < key_end; j0 += kBlock) {
    const std::size_t cols = smaller(kBlock, key_end - j0);
    __syncthreads();  // the previous block's tiles are no longer read
    stage_rows(k + row.slice, j0, cols, d, row.k_block);
    stage_rows(v + row.slice, j0, cols, d, row.v_block);
    __syncthreads();
    if (!row.active) continue;
    for (std::size_t c = 0; c < cols; ++c) {
      p[c] = math::attention_masked(row.i, j0 + c, causal)
                 ? math::negative_infinity<T>()
                 : scale * dot<T>(q + row.slice + row.i * d, row.k_block + c * d, d);
    }
    T block_sum;
    const T alpha = math::online_softmax_block(p, cols, max, block_sum);
    math::online_softmax_rescale(alpha, block_sum, sum, out, d);
    for (std::size_t c = 0; c < cols; ++c) {
      for (std::size_t x = 0; x < d; ++x)
        out[x] += math::attention_operand<In>(p[c]) * row.v_block[c * d + x];
    }
  }
  if (!row.active) return;
  const T inv = T(1) / sum;
  for (std::size_t x = 0; x < d; ++x)
    out[x] *= inv;
  lse[blockIdx.x * seq + row.i] = math::online_softmax_lse(max, sum);
}

/// Thread t of block (slice, key block) computes dK and dV of key row j = j0 + t over every
/// query block that sees it.
template <class T, class In>
__global__ void key_grad_rows(const In* q, const In* k, const In* v, const In* o, const T* lse,
                              const T* dout, std::size_t seq, std::size_t d, bool causal, T scale,
                              T* dk, T* dv) {
  extern __shared__ unsigned char shared_bytes[];
  T* q_block = reinterpret_cast<T*>(shared_bytes);
  T* dout_block = q_block + kBlock * d;
  T* lse_block = dout_block + kBlock * d;
  T* delta_block = lse_block + kBlock;
  const std::size_t slice = blockIdx.x * seq * d;
  const std::size_t j0 = blockIdx.y * kBlock;
  const std::size_t j = j0 + threadIdx.x;
  const bool active = j < seq;
  T* dk_row = dk + slice + j * d;
  T* dv_row = dv + slice + j * d;
  if (active) {
    for (std::size_t x = 0; x < d; ++x)
      dk_row[x] = dv_row[x] = T(0);
  }
  for (std::size_t i0 = causal ? j0 : 0; i0 < seq; i0 += kBlock) {
    const std::size_t rows = smaller(kBlock, seq - i0);
    __syncthreads();
    stage_rows(q + slice, i0, rows, d, q_block);
    stage_rows<T, T, In>(dout + slice, i0, rows, d, dout_block);
    if (threadIdx.x < rows) {
      const std::size_t i = i0 + threadIdx.x;
      lse_block[threadIdx.x] = lse[blockIdx.x * seq + i];
      delta_block[threadIdx.x] = math::attention_delta(dout + slice + i * d, o + slice + i * d, d);
    }
    __syncthreads();
    if (!active) continue;
    for (std::size_t r = 0; r < rows; ++r) {
      if (math::attention_masked(i0 + r, j, causal)) continue;
      const T* q_row = q_block + r * d;
      const T* dout_row = dout_block + r * d;
      const T p =
          math::attention_probability(scale * dot<T>(q_row, k + slice + j * d, d), lse_block[r]);
      const T ds = math::attention_operand<In>(
          scale *
          math::attention_score_grad(p, dot<T>(dout_row, v + slice + j * d, d), delta_block[r]));
      const T p_operand = math::attention_operand<In>(p);
      for (std::size_t x = 0; x < d; ++x) {
        dv_row[x] += p_operand * dout_row[x];
        dk_row[x] += ds * q_row[x];
      }
    }
  }
}

/// Thread t of block (slice, query block) computes dQ of query row i = i0 + t.
template <class T, class In>
__global__ void query_grad_rows(const In* q, const In* k, const In* v, const In* o, const T* lse,
                                const T* dout, std::size_t seq, std::size_t d, bool causal, T scale,
                                T* dq) {
  extern __shared__ unsigned char shared_bytes[];
  const QueryRow<T> row(shared_bytes, seq, d);
  T* dq_row = dq + row.slice + row.i * d;
  T delta = T(0), row_lse = T(0);
  if (row.active) {
    for (std::size_t x = 0; x < d; ++x)
      dq_row[x] = T(0);
    delta = math::attention_delta(dout + row.slice + row.i * d, o + row.slice + row.i * d, d);
    row_lse = lse[blockIdx.x * seq + row.i];
  }
  const std::size_t key_end = causal ? row.i0 + row.rows : seq;
  for (std::size_t j0 = 0; j0 < key_end; j0 += kBlock) {
    const std::size_t cols = smaller(kBlock, key_end - j0);
    __syncthreads();
    stage_rows(k + row.slice, j0, cols, d, row.k_block);
    stage_rows(v + row.slice, j0, cols, d, row.v_block);
    __syncthreads();
    if (!row.active) continue;
    for (std::size_t c = 0; c < cols; ++c) {
      if (math::attention_masked(row.i, j0 + c, causal)) continue;
      const T* k_row = row.k_block + c * d;
      const T p =
          math::attention_probability(scale * dot<T>(q + row.slice + row.i * d, k_row, d), row_lse);
      T dp = T(0);  // dO . v, dO as the products read it
      for (std::size_t x = 0; x < d; ++x)
        dp += math::attention_operand<In>(dout[row.slice + row.i * d + x]) * row.v_block[c * d + x];
      const T ds = math::attention_operand<In>(scale * math::attention_score_grad(p, dp, delta));
      for (std::size_t x = 0; x < d; ++x)
        dq_row[x] += ds * k_row[x];
    }
  }
}

/// Launches `kernel` on the grid (batch_heads, blocks of seq) with `shared` bytes of dynamic
/// shared memory, raising the kernel's limit above the default 48 KiB when needed.
template <class Kernel, class... Args>
void launch(Kernel kernel, std::size_t batch_heads, std::size_t seq, std::size_t shared,
            Args... args) {
  const std::size_t blocks = (seq + kBlock - 1) / kBlock;
  if (batch_heads > static_cast<std::size_t>(std::numeric_limits<int>::max()) || blocks > 65535) {
    throw std::invalid_argument("kernels: attention of " + std::to_string(batch_heads) +
                                " slices of " + std::to_string(seq) +
                                " rows exceeds one CUDA grid");
  }
  if (shared > 48 * 1024) {
    MPITRON_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(shared)));
  }
  kernel<<<dim3(static_cast<unsigned>(batch_heads), static_cast<unsigned>(blocks)),
           static_cast<unsigned>(kBlock), shared>>>(args...);
  MPITRON_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

template <class T, class In>
void Kernels::attention_forward(const In* q, const In* k, const In* v, std::size_t batch_heads,
                                std::size_t seq, std::size_t d, bool causal, T scale, T* o,
                                T* lse) {
  launch(forward_rows<T, In>, batch_heads, seq, 2 * kBlock * d * sizeof(T), q, k, v, seq, d, causal,
         scale, o, lse);
}

template <class T, class In>
void Kernels::attention_backward(const In* q, const In* k, const In* v, const In* o, const T* lse,
                                 const T* dout, std::size_t batch_heads, std::size_t seq,
                                 std::size_t d, bool causal, T scale, T* dq, T* dk, T* dv) {
  launch(key_grad_rows<T, In>, batch_heads, seq, (2 * kBlock * d + 2 * kBlock) * sizeof(T), q, k, v,
         o, lse, dout, seq, d, causal, scale, dk, dv);
  launch(query_grad_rows<T, In>, batch_heads, seq, 2 * kBlock * d * sizeof(T), q, k, v, o, lse,
         dout, seq, d, causal, scale, dq);
}

template <class T>
void Kernels::attention_merge(T* o, T* lse, const T* block_o, const T* block_lse, std::size_t rows,
                              std::size_t d) {
  for_each(rows, [=] __device__(std::size_t r) {
    math::attention_merge_row(o + r * d, lse[r], block_o + r * d, block_lse[r], d);
  });
}

#define MPITRON_INSTANTIATE_READS(T, In)                                                         \
  template void Kernels::attention_forward<T, In>(const In*, const In*, const In*, std::size_t,  \
                                                  std::size_t, std::size_t, bool, T, T*, T*);    \
  template void Kernels::attention_backward<T, In>(const In*, const In*, const In*, const In*,   \
                                                   const T*, const T*, std::size_t, std::size_t, \
                                                   std::size_t, bool, T, T*, T*, T*);
#define MPITRON_INSTANTIATE(T)    \
  MPITRON_INSTANTIATE_READS(T, T) \
  template void Kernels::attention_merge<T>(T*, T*, const T*, const T*, std::size_t, std::size_t);
MPITRON_INSTANTIATE(float)
MPITRON_INSTANTIATE(double)
MPITRON_INSTANTIATE_READS(float, bf16)
#undef MPITRON_INSTANTIATE
#undef MPITRON_INSTANTIATE_READS

}  // namespace mpitron::kernels::cuda
