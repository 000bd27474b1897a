// float32 <-> bfloat16 (and float32 through bfloat16) on the GPU: one grid-stride pass through
// the functions of kernels/bf16.h, so the GPU rounds as the CPU loops do, bit for bit.
#include "kernels/bf16.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/kernels.h"

namespace mpitron::kernels::cuda {

void Kernels::convert_to_bf16(const float* in, bf16* out, std::size_t n) {
  for_each(n, [=] __device__(std::size_t i) { out[i] = to_bf16(in[i]); });
}

void Kernels::convert_to_float(const bf16* in, float* out, std::size_t n) {
  for_each(n, [=] __device__(std::size_t i) { out[i] = bf16_to_float(in[i]); });
}

void Kernels::round_through_bf16(const float* in, float* out, std::size_t n) {
  for_each(n, [=] __device__(std::size_t i) { out[i] = bf16_to_float(to_bf16(in[i])); });
}

}  // namespace mpitron::kernels::cuda
