// The fused attention under bfloat16 GEMM operands (train --bf16): scaled_dot_product_attention
// reads float32 q, k and v rounded to bfloat16 and keeps those bfloat16 copies for backward. Its
// output and gradients equal, bit for bit, the float32 attention's on inputs rounded by
// read_as_bf16 (whose gradient passes unchanged), over one widened chunk and several; what it
// keeps is 2 bytes an element of q, k and v (the allocator's counters).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "kernels/allocator.h"
#include "kernels/ops.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

using kernels::GemmOperands;
using kernels::GemmOperandsScope;

TEST(ReadAsBf16, RoundsTheValuesAndPassesTheGradientUnchanged) {
  const Tensor x = randn({4, 33}, 1).set_requires_grad();
  const Tensor y = read_as_bf16(x);
  Tensor want = Tensor::empty(x.shape());
  kernels::round_to_bf16(x.buffer(), want.buffer());
  EXPECT_EQ(y.to_vector(), want.to_vector());
  EXPECT_NE(y.to_vector(), x.to_vector()) << "randn's values are not all bfloat16";
  const Tensor dy = randn({4, 33}, 2);
  y.backward(dy);
  EXPECT_EQ(x.grad().to_vector(), dy.to_vector());
  EXPECT_THROW(read_as_bf16(randn({2}, 3, 1.0, DType::f64)), std::invalid_argument);
}

TEST(AttentionBf16, WidensAtMostTheScratchAndAtLeastOneSlice) {
  const std::size_t slice = 256 * 64;  // a [seq 256, head_dim 64] slice: 3 x 64 KiB of float32
  EXPECT_EQ(widened_attention_slices(10, slice), 10u);
  EXPECT_EQ(widened_attention_slices(1000, slice), kWidenedAttentionBytes / (3 * slice * 4));
  EXPECT_EQ(widened_attention_slices(5, kWidenedAttentionBytes), 1u);
}

// sdpa under bfloat16 operands against sdpa under float32 operands on read_as_bf16(q, k, v):
// the output and dq, dk, dv bit for bit (the same kernel on the same values, slice by slice).
void expect_rounded_inputs_attention(const Shape& shape, bool causal) {
  const Tensor q = randn(shape, 11).set_requires_grad(), k = randn(shape, 12).set_requires_grad(),
               v = randn(shape, 13).set_requires_grad();
  const Tensor dout = randn(shape, 14);
  Tensor o;
  {
    const GemmOperandsScope operands(GemmOperands::bfloat16);
    o = scaled_dot_product_attention(q, k, v, causal);
  }
  o.backward(dout);
  const Tensor q32 = q.detach().set_requires_grad(), k32 = k.detach().set_requires_grad(),
               v32 = v.detach().set_requires_grad();
  const GemmOperandsScope operands(GemmOperands::float32);
  const Tensor want =
      scaled_dot_product_attention(read_as_bf16(q32), read_as_bf16(k32), read_as_bf16(v32), causal);
  want.backward(dout);
  EXPECT_EQ(o.dtype(), DType::f32);
  EXPECT_EQ(o.to_vector(), want.to_vector());
  EXPECT_EQ(q.grad().to_vector(), q32.grad().to_vector());
  EXPECT_EQ(k.grad().to_vector(), k32.grad().to_vector());
  EXPECT_EQ(v.grad().to_vector(), v32.grad().to_vector());
  const Tensor unrounded = scaled_dot_product_attention(q32, k32, v32, causal);
  EXPECT_NE(o.to_vector(), unrounded.to_vector()) << "the rounding changes the output";
}

TEST(AttentionBf16, IsTheFloat32AttentionOfInputsRoundedToBfloat16) {
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    expect_rounded_inputs_attention({2, 3, 70, 16}, causal);  // one chunk; a partial key block
  }
  // 96 slices of [256, 64]: more than widened_attention_slices (85), so two widened chunks.
  const Shape large{2, 48, 256, 64};
  ASSERT_LT(widened_attention_slices(96, 256 * 64), 96u);
  expect_rounded_inputs_attention(large, true);
}

// The in-use bytes sdpa adds beyond its output once the caller has dropped q, k and v, which
// are made from leaves (scale keeps nothing), so only what sdpa keeps holds them.
std::size_t kept_by_attention(GemmOperands precision, const Tensor& leaf) {
  const GemmOperandsScope operands(precision);
  const std::size_t start = kernels::allocator_stats(Device::cpu).in_use_bytes;
  Tensor o;
  {
    const Tensor q = scale(leaf, 1.0), k = scale(leaf, 0.5), v = scale(leaf, 2.0);
    o = scaled_dot_product_attention(q, k, v, true);
  }
  const std::size_t output = kernels::allocation_class(o.buffer().bytes());
  return kernels::allocator_stats(Device::cpu).in_use_bytes - start - output;
}

TEST(AttentionBf16, KeepsQKVAsBfloat16UnderBfloat16Operands) {
  const Shape shape{2, 4, 128, 32};
  const Tensor leaf = randn(shape, 21).set_requires_grad();
  const std::size_t elements = 2 * 4 * 128 * 32, rows = 2 * 4 * 128;
  const std::size_t lse = kernels::allocation_class(rows * 4);
  EXPECT_EQ(kept_by_attention(GemmOperands::float32, leaf),
            3 * kernels::allocation_class(elements * 4) + lse);
  EXPECT_EQ(kept_by_attention(GemmOperands::bfloat16, leaf),
            3 * kernels::allocation_class(elements * 2) + lse);
}

TEST(AttentionBf16, RefusesBfloat16Inputs) {
  Tensor q = Tensor::empty({2, 8, 4}, DType::bf16, Device::cpu);
  kernels::convert(randn({2, 8, 4}, 31).buffer(), q.buffer());
  EXPECT_THROW(scaled_dot_product_attention(q, q, q, true), std::invalid_argument);
}

}  // namespace
}  // namespace mpitron::test
