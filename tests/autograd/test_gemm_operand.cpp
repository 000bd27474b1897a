// gemm_operand and the GEMM-backed ops that keep it for backward (linear, fused_mlp): under
// kernels::GemmOperands::bfloat16 a float32 input is rounded to bfloat16 once, multiplied and
// kept as bfloat16 (the allocator's counters show 2 bytes an element kept, and the float32 input
// freed), with the bits of the GEMMs that rounded the float32 input at every call (kernels::gemm
// on the float32 buffers, bit for bit); float32 operands keep the float32 input.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
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

const char* name_of(GemmOperands operands) {
  return operands == GemmOperands::bfloat16 ? "bfloat16 operands" : "float32 operands";
}

TEST(GemmOperand, IsTheBfloat16CopyOfAFloat32InputUnderBfloat16Operands) {
  const Tensor x = randn({3, 5}, 1);
  const Tensor x64 = randn({3, 5}, 2, 1.0, DType::f64);
  {
    const GemmOperandsScope operands(GemmOperands::float32);
    EXPECT_EQ(gemm_operand(x).impl(), x.impl());
  }
  const GemmOperandsScope operands(GemmOperands::bfloat16);
  EXPECT_EQ(gemm_operand(x64).impl(), x64.impl()) << "float64 is never rounded";
  const Tensor copy = gemm_operand(x);
  EXPECT_EQ(copy.dtype(), DType::bf16);
  EXPECT_EQ(copy.shape(), x.shape());
  EXPECT_FALSE(copy.requires_grad());
  kernels::Buffer want(15, DType::bf16, Device::cpu);
  kernels::convert(x.buffer(), want);
  EXPECT_EQ(std::memcmp(copy.buffer().data(), want.data(), want.bytes()), 0);
}

TEST(GemmOperand, LinearRefusesAnOperandThatIsNotTheInputsCopy) {
  const Tensor x = randn({3, 5}, 3), w = randn({4, 5}, 4);
  EXPECT_THROW(linear(x, w, Tensor(), randn({5, 3}, 5)), std::invalid_argument);
  EXPECT_THROW(linear(x, w, Tensor(), randn({3, 5}, 5, 1.0, DType::f64)), std::invalid_argument);
}

// linear's output and its three gradients against kernels::gemm on the float32 buffers (which
// rounds both operands at each call under bfloat16 operands), bit for bit, with a fresh weight
// gradient and one accumulated into an existing gradient (beta = 1).
TEST(GemmOperand, LinearHasTheBitsOfGemmsOnTheFloat32Input) {
  constexpr std::size_t kRows = 6, kIn = 40, kOut = 7;
  for (const GemmOperands precision : {GemmOperands::float32, GemmOperands::bfloat16}) {
    SCOPED_TRACE(name_of(precision));
    const GemmOperandsScope operands(precision);
    const Tensor x = randn({2, 3, kIn}, 6).set_requires_grad();
    Tensor w = randn({kOut, kIn}, 7).set_requires_grad();
    const Tensor b = randn({kOut}, 8).set_requires_grad();
    const Tensor dy = randn({2, 3, kOut}, 9);
    const Tensor old_dw = randn({kOut, kIn}, 10);
    w.set_grad(old_dw.clone());
    const Tensor y = linear(x, w, b);
    y.backward(dy);

    Tensor want_y = Tensor::empty({2, 3, kOut});
    kernels::gemm(false, true, kRows, kOut, kIn, 1.0, x.buffer(), w.buffer(), 0.0, want_y.buffer());
    kernels::bias_add(want_y.buffer(), b.buffer(), kOut, want_y.buffer());
    Tensor want_dx = Tensor::empty({2, 3, kIn});
    kernels::gemm(false, false, kRows, kIn, kOut, 1.0, dy.buffer(), w.buffer(), 0.0,
                  want_dx.buffer());
    Tensor want_dw = old_dw.clone();
    kernels::gemm(true, false, kOut, kIn, kRows, 1.0, dy.buffer(), x.buffer(), 1.0,
                  want_dw.buffer());
    EXPECT_EQ(y.to_vector(), want_y.to_vector());
    EXPECT_EQ(x.grad().to_vector(), want_dx.to_vector());
    EXPECT_EQ(w.grad().to_vector(), want_dw.to_vector());
    EXPECT_EQ(x.grad().dtype(), DType::f32);

    const Tensor fresh_w = w.detach().set_requires_grad();
    linear(x.detach(), fresh_w).backward(dy);
    Tensor want_fresh = Tensor::empty({kOut, kIn});
    kernels::gemm(true, false, kOut, kIn, kRows, 1.0, dy.buffer(), x.buffer(), 0.0,
                  want_fresh.buffer());
    EXPECT_EQ(fresh_w.grad().to_vector(), want_fresh.to_vector());
  }
}

// A float32 tensor's values as a bfloat16 tensor (rounded to nearest even).
Tensor to_bf16_tensor(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), DType::bf16, x.device());
  kernels::convert(x.buffer(), out.buffer());
  return out;
}

// linear_bf16_output is linear under bfloat16 operands with each output element rounded once,
// and its backward from a bfloat16 dy is linear's from that dy widened, bit for bit.
TEST(GemmOperand, LinearBf16OutputIsLinearsProductRoundedOnce) {
  constexpr std::int64_t kInOut = 40, kOutOut = 7;
  const GemmOperandsScope operands(GemmOperands::bfloat16);
  const Tensor x = randn({2, 3, kInOut}, 21).set_requires_grad();
  const Tensor w = randn({kOutOut, kInOut}, 22).set_requires_grad();
  const Tensor y = linear_bf16_output(x, w);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(y.shape(), (Shape{2, 3, kOutOut}));
  const Tensor x32 = x.detach().set_requires_grad(), w32 = w.detach().set_requires_grad();
  const Tensor y32 = linear(x32, w32);
  EXPECT_EQ(y.to_vector(), to_bf16_tensor(y32).to_vector());

  const Tensor dy = to_bf16_tensor(randn({2, 3, kOutOut}, 23));
  y.backward(dy);
  Tensor dy32 = Tensor::empty(dy.shape());
  kernels::convert(dy.buffer(), dy32.buffer());
  y32.backward(dy32);
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().to_vector(), x32.grad().to_vector());
  EXPECT_EQ(w.grad().to_vector(), w32.grad().to_vector());

  EXPECT_THROW(
      linear_bf16_output(randn({3, 5}, 24, 1.0, DType::f64), randn({4, 5}, 25, 1.0, DType::f64)),
      std::invalid_argument);
  EXPECT_THROW(linear_bf16_output(randn({3, 5}, 26), randn({4, 6}, 27)), std::invalid_argument);
}

// What an op keeps for backward, measured as the in-use bytes it adds beyond its output once the
// caller has dropped its input (the allocator's counters; CPU, float32 input [512, 1024]). The
// input does not require a gradient (a leaf that does is held by the graph to receive it).
constexpr std::int64_t kRows = 512, kIn = 1024, kMid = 64, kOut = 8;

std::size_t bytes_of(std::int64_t rows, std::int64_t cols, DType dtype) {
  return kernels::allocation_class(static_cast<std::size_t>(rows * cols) *
                                   kernels::dtype_size(dtype));
}

// In-use bytes after op(x) with x released, above what was in use before x was made.
template <class Op>
std::size_t kept_after_forward(const Op& op) {
  const std::size_t start = kernels::allocator_stats(Device::cpu).in_use_bytes;
  Tensor out;
  {
    const Tensor x = randn({kRows, kIn}, 11);
    out = op(x);
  }
  return kernels::allocator_stats(Device::cpu).in_use_bytes - start -
         bytes_of(kRows, kOut, DType::f32);
}

TEST(GemmOperand, LinearAndFusedMlpKeepTheirInputAsBfloat16UnderBfloat16Operands) {
  const Tensor w = randn({kOut, kIn}, 12).set_requires_grad();
  const Tensor w1 = randn({kMid, kIn}, 13).set_requires_grad();
  const Tensor b1 = randn({kMid}, 14).set_requires_grad();
  const Tensor w2 = randn({kOut, kMid}, 15).set_requires_grad();
  for (const GemmOperands precision : {GemmOperands::float32, GemmOperands::bfloat16}) {
    SCOPED_TRACE(name_of(precision));
    const GemmOperandsScope operands(precision);
    const DType kept = precision == GemmOperands::bfloat16 ? DType::bf16 : DType::f32;
    EXPECT_EQ(kept_after_forward([&](const Tensor& x) { return linear(x, w); }),
              bytes_of(kRows, kIn, kept));
    // fused_mlp's pre-activation as well (bfloat16: fc1's product rounded before its bias).
    EXPECT_EQ(kept_after_forward([&](const Tensor& x) { return fused_mlp(x, w1, b1, w2); }),
              bytes_of(kRows, kIn, kept) + bytes_of(kRows, kMid, kept));
  }
}

}  // namespace
}  // namespace mpitron::test
