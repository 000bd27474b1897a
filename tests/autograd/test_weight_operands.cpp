// weight_operand and Bf16WeightScope: inside a scope, under bfloat16 operands, a parameter is
// rounded to bfloat16 once and every later call hands out that copy without allocating; the
// copies are freed when the scope ends, or kept in a Bf16WeightCopies and rounded again into the
// same buffers by its next scope; outside a scope, for tensors that are not parameters and
// under float32 operands nothing is kept. linear, linear_bf16_output and fused_mlp (over several
// row chunks) read their weights through it with the same bits inside a scope as outside.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "autograd/weight_operands.h"
#include "kernels/allocator.h"
#include "kernels/ops.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

using kernels::GemmOperands;
using kernels::GemmOperandsScope;

std::size_t in_use() {
  return kernels::allocator_stats(Device::cpu).in_use_bytes;
}

std::uint64_t requests() {
  return kernels::allocator_stats(Device::cpu).requests;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.buffer().data(), b.buffer().data(), a.buffer().bytes()) == 0;
}

TEST(WeightOperand, RoundsAParameterOnceInsideAScopeAndFreesItAfter) {
  const GemmOperandsScope operands(GemmOperands::bfloat16);
  const Tensor w = randn({64, 48}, 1).set_requires_grad();
  const std::size_t before = in_use();
  {
    const Bf16WeightScope scope;
    const Tensor first = weight_operand(w);
    EXPECT_EQ(first.dtype(), DType::bf16);
    EXPECT_TRUE(same_bits(first, gemm_operand(w)));
    const std::uint64_t made = requests();
    {
      const Bf16WeightScope inner;
      EXPECT_EQ(weight_operand(w).impl(), first.impl());
    }
    EXPECT_EQ(weight_operand(w).impl(), first.impl()) << "the inner scope kept the outer's copy";
    EXPECT_EQ(requests(), made) << "a kept copy is handed out without allocating";
  }
  EXPECT_EQ(in_use(), before) << "the copy is freed with its scope";
  EXPECT_NE(weight_operand(w).impl(), weight_operand(w).impl()) << "nothing kept outside a scope";
}

// Scopes on a Bf16WeightCopies round each parameter again into the copy the last scope made:
// the new values' bits, no allocation, and the copy kept between scopes until the storage goes.
TEST(WeightOperand, KeptCopiesAreRoundedAgainIntoTheSameBufferByTheNextScope) {
  const GemmOperandsScope operands(GemmOperands::bfloat16);
  Tensor w = randn({64, 48}, 3).set_requires_grad();
  const std::size_t before = in_use();
  {
    Bf16WeightCopies copies;
    Tensor first;
    {
      const Bf16WeightScope scope(copies);
      first = weight_operand(w);
      EXPECT_TRUE(same_bits(first, gemm_operand(w)));
    }
    EXPECT_GT(in_use(), before) << "the copy is kept between scopes";
    kernels::scale(w.buffer(), -3.0, w.buffer());  // the optimizer's step between two scopes
    const std::uint64_t made = requests();
    {
      const Bf16WeightScope scope(copies);
      const Tensor again = weight_operand(w);
      EXPECT_EQ(again.impl(), first.impl()) << "rounded into the same buffer";
      EXPECT_EQ(requests(), made) << "without allocating";
      EXPECT_TRUE(same_bits(again, gemm_operand(w))) << "the new values' bits";
      {
        const Bf16WeightScope inner;
        EXPECT_EQ(weight_operand(w).impl(), first.impl()) << "an inner scope adds nothing";
      }
    }
  }
  EXPECT_EQ(in_use(), before) << "freed with the storage";
}

TEST(WeightOperand, KeepsNothingForTensorsThatAreNotParametersOrUnderFloat32Operands) {
  const Tensor w = randn({8, 8}, 2).set_requires_grad();
  const Tensor constant = randn({8, 8}, 3);
  const Bf16WeightScope scope;
  {
    const GemmOperandsScope operands(GemmOperands::float32);
    EXPECT_EQ(weight_operand(w).impl(), w.impl());
  }
  const GemmOperandsScope operands(GemmOperands::bfloat16);
  EXPECT_NE(weight_operand(constant).impl(), weight_operand(constant).impl());
  const Tensor x = randn({8, 8}, 4).set_requires_grad();
  const Tensor product = linear(x, w);
  EXPECT_NE(weight_operand(product).impl(), weight_operand(product).impl())
      << "an op's output is not a parameter";
}

// linear, linear_bf16_output and fused_mlp forward and backward on fresh parameters; fused_mlp's
// 320 x 1024 float32 rows take two chunks of kFusedMlpScratchBytes.
// Returns the outputs, then the inputs' gradients.
std::vector<Tensor> run_ops() {
  const Tensor x = randn({320, 64}, 5).set_requires_grad();
  const Tensor w = randn({96, 64}, 6).set_requires_grad();
  const Tensor b = randn({96}, 7).set_requires_grad();
  const Tensor w1 = randn({1024, 64}, 8, 0.1).set_requires_grad();
  const Tensor b1 = randn({1024}, 9).set_requires_grad();
  const Tensor w2 = randn({64, 1024}, 10, 0.1).set_requires_grad();
  const Tensor y = linear(x, w, b);
  const Tensor logits = linear_bf16_output(x, w);
  const Tensor z = fused_mlp(x, w1, b1, w2);
  y.backward(randn({320, 96}, 11));
  logits.backward(gemm_operand(randn({320, 96}, 12)));
  z.backward(randn({320, 64}, 13));
  return {y, logits, z, x.grad(), w.grad(), b.grad(), w1.grad(), b1.grad(), w2.grad()};
}

TEST(WeightOperand, OpsHaveTheSameBitsInsideAScope) {
  static_assert(320 * 1024 * 4 > kFusedMlpScratchBytes, "fused_mlp must take several chunks");
  const GemmOperandsScope operands(GemmOperands::bfloat16);
  const std::vector<Tensor> outside = run_ops();
  std::vector<Tensor> inside;
  {
    const Bf16WeightScope scope;
    inside = run_ops();
  }
  ASSERT_EQ(inside.size(), outside.size());
  for (std::size_t i = 0; i < inside.size(); ++i)
    EXPECT_TRUE(same_bits(inside[i], outside[i])) << "value " << i;
}

}  // namespace
}  // namespace mpitron::test
