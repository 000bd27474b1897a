// The fused attention under bfloat16 GEMM operands (train --bf16): scaled_dot_product_attention
// reads float32 q, k and v rounded to bfloat16 and keeps those bfloat16 copies, and its output
// rounded, for backward. Its output and gradients equal, bit for bit, the kernels' on bfloat16
// copies of q, k, v and of that output (their products on bfloat16 operands,
// kernels::attention_forward); what it keeps is 2 bytes an element of q, k, v and the output
// (the allocator's counters).
#include <gtest/gtest.h>

#include <cmath>
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

// dq, dk and dv of the kernel from q, k, v and the output `o` (all float32, or all bfloat16).
std::vector<Tensor> kernel_grads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                                 const Tensor& lse, const Tensor& dout, bool causal) {
  const auto seq = static_cast<std::size_t>(q.size(-2)), d = static_cast<std::size_t>(q.size(-1));
  std::vector<Tensor> grads = {Tensor::empty(q.shape()), Tensor::empty(q.shape()),
                               Tensor::empty(q.shape())};
  kernels::attention_backward(q.buffer(), k.buffer(), v.buffer(), o.buffer(), lse.buffer(),
                              dout.buffer(), seq, d, causal, 1.0 / std::sqrt(double(d)),
                              grads[0].buffer(), grads[1].buffer(), grads[2].buffer());
  return grads;
}

// x's bfloat16 copy (kernels::convert, round to nearest even).
Tensor bf16_copy(const Tensor& x) {
  Tensor h = Tensor::empty(x.shape(), DType::bf16, x.device());
  kernels::convert(x.buffer(), h.buffer());
  return h;
}

// sdpa under bfloat16 operands against the kernels on bfloat16 copies of q, k and v: the output
// bit for bit (the same kernel arithmetic on the same values), and dq, dk, dv bit for bit those
// of the kernel's backward given that output's bfloat16 copy. Both differ from the float32
// kernels' on the same values, whose products do not round their operands.
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
  const GemmOperandsScope operands(GemmOperands::float32);
  const Tensor q16 = bf16_copy(q.detach()), k16 = bf16_copy(k.detach()),
               v16 = bf16_copy(v.detach());
  const auto seq = static_cast<std::size_t>(q.size(-2)), d = static_cast<std::size_t>(q.size(-1));
  Shape lse_shape = shape;
  lse_shape.pop_back();
  Tensor want = Tensor::empty(shape), lse = Tensor::empty(lse_shape);
  kernels::attention_forward(q16.buffer(), k16.buffer(), v16.buffer(), seq, d, causal,
                             1.0 / std::sqrt(double(d)), want.buffer(), lse.buffer());
  EXPECT_EQ(o.dtype(), DType::f32);
  EXPECT_EQ(o.to_vector(), want.to_vector());
  const std::vector<Tensor> grads = kernel_grads(q16, k16, v16, bf16_copy(want), lse, dout, causal);
  EXPECT_EQ(q.grad().to_vector(), grads[0].to_vector());
  EXPECT_EQ(k.grad().to_vector(), grads[1].to_vector());
  EXPECT_EQ(v.grad().to_vector(), grads[2].to_vector());
  const Tensor q32 = read_as_bf16(q.detach()), k32 = read_as_bf16(k.detach()),
               v32 = read_as_bf16(v.detach());
  EXPECT_NE(q.grad().to_vector(),
            kernel_grads(q32, k32, v32, read_as_bf16(want), lse, dout, causal)[0].to_vector())
      << "the products' bfloat16 operands change dq";
  const Tensor unrounded = scaled_dot_product_attention(q32, k32, v32, causal);
  EXPECT_NE(o.to_vector(), unrounded.to_vector()) << "the rounded probabilities change the output";
}

TEST(AttentionBf16, IsTheKernelsAttentionOfBfloat16Copies) {
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    expect_rounded_inputs_attention({2, 3, 70, 16}, causal);  // one chunk; a partial key block
  }
  expect_rounded_inputs_attention({2, 8, 256, 64}, true);  // whole tiles, several key blocks
}

// The in-use bytes sdpa adds beyond its output once the caller has dropped q, k and v, which
// are made from leaves (scale keeps nothing), so only what sdpa keeps holds them: in float32 q,
// k, v and the output itself; under bfloat16 operands bfloat16 copies of all four.
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

TEST(AttentionBf16, KeepsQKVAndTheOutputAsBfloat16UnderBfloat16Operands) {
  const Shape shape{2, 4, 128, 32};
  const Tensor leaf = randn(shape, 21).set_requires_grad();
  const std::size_t elements = 2 * 4 * 128 * 32, rows = 2 * 4 * 128;
  const std::size_t lse = kernels::allocation_class(rows * 4);
  EXPECT_EQ(kept_by_attention(GemmOperands::float32, leaf),
            3 * kernels::allocation_class(elements * 4) + lse);
  EXPECT_EQ(kept_by_attention(GemmOperands::bfloat16, leaf),
            4 * kernels::allocation_class(elements * 2) + lse);
}

TEST(AttentionBf16, RefusesBfloat16Inputs) {
  Tensor q = Tensor::empty({2, 8, 4}, DType::bf16, Device::cpu);
  kernels::convert(randn({2, 8, 4}, 31).buffer(), q.buffer());
  EXPECT_THROW(scaled_dot_product_attention(q, q, q, true), std::invalid_argument);
}

}  // namespace
}  // namespace mpitron::test
