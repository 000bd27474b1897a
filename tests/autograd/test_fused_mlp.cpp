// fused_mlp = gelu(x W1^T + b1) W2^T: central-difference gradients (float64), the value and every
// gradient against the unfused linear -> gelu -> linear (both dtypes), and the bytes it keeps
// for backward against the unfused composition's (the allocator's counters); under bfloat16
// operands, against the composition that rounds fc1's product.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "autograd_test_support.h"
#include "kernels/allocator.h"
#include "kernels/ops.h"
#include "support/compare.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

using ::mpitron::test::expect_close;

// in, mid and out differ, so a wrongly transposed gradient cannot even have the right shape.
constexpr std::int64_t kIn = 4, kMid = 6, kOut = 3;

const char* form_name(GeluForm form) {
  return form == GeluForm::exact ? "exact" : "tanh";
}

class FusedMlpGradcheck : public AutogradTest {};

// x, W1 ~ N(0, 1) with in = 4 put the pre-activations at std ~2: GELU's tails and its middle.
TEST_P(FusedMlpGradcheck, EveryInputBothFormsFor2DAnd3DInputs) {
  for (const Shape& x_shape : {Shape{5, kIn}, Shape{2, 3, kIn}}) {
    for (const GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
      SCOPED_TRACE(to_string(x_shape) + " " + form_name(form));
      const Inputs inputs{normal(x_shape, 1), normal({kMid, kIn}, 2), normal({kMid}, 3),
                          normal({kOut, kMid}, 4)};
      EXPECT_TRUE(gradcheck_passes(
          [form](const Inputs& in) { return fused_mlp(in[0], in[1], in[2], in[3], form); },
          inputs));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, FusedMlpGradcheck, ::mpitron::test::all_devices(),
                         ::mpitron::test::device_dtype_name);

class FusedMlpMatchesUnfused : public ::mpitron::test::DeviceDtypeTest {
 protected:
  Tensor leaf(const Shape& shape, std::uint64_t seed) const {
    return randn(shape, seed, 1.0, dtype(), device()).set_requires_grad();
  }
  static Tensor copy_of(const Tensor& t) { return t.detach().clone().set_requires_grad(); }
  // The fused output equals the unfused one, and the gradient of each fused input {x, W1, b1,
  // W2} the gradient of the matching unfused input.
  static void expect_matches(const Tensor& fused, const Tensor& unfused,
                             const std::vector<Tensor>& fused_inputs,
                             const std::vector<Tensor>& inputs, double tolerance) {
    expect_close(fused, unfused, tolerance);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      SCOPED_TRACE("input " + std::to_string(i));
      expect_close(fused_inputs[i].grad(), inputs[i].grad(), tolerance);
    }
  }
};

// Both sides run the same kernels (GEMM, bias, GELU and its derivative, row sums) on the same
// operands, so they agree to the last bit unless a GEMM library picks another summation order
// for one of the calls. The tolerance allows that: sums of at most 7 terms of magnitude <~ 5,
// 7 * 5 * eps/2 relative to max(1, |value|): 1e-5 in float32 (eps 1.2e-7), 1e-12 in float64.
TEST_P(FusedMlpMatchesUnfused, ValueAndEveryGradientBothForms) {
  const double tolerance = dtype() == DType::f64 ? 1e-12 : 1e-5;
  for (const Shape& x_shape : {Shape{7, kIn}, Shape{2, 3, kIn}}) {
    for (const GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
      SCOPED_TRACE(to_string(x_shape) + " " + form_name(form));
      const Tensor x = leaf(x_shape, 5), w1 = leaf({kMid, kIn}, 6), b1 = leaf({kMid}, 7);
      const Tensor w2 = leaf({kOut, kMid}, 8);
      const Tensor fx = copy_of(x), fw1 = copy_of(w1), fb1 = copy_of(b1), fw2 = copy_of(w2);
      const Tensor unfused = linear(gelu(linear(x, w1, b1), form), w2);
      const Tensor fused = fused_mlp(fx, fw1, fb1, fw2, form);
      const Tensor dz = randn(unfused.shape(), 9, 1.0, dtype(), device());
      unfused.backward(dz);
      fused.backward(dz);
      expect_matches(fused, unfused, {fx, fw1, fb1, fw2}, {x, w1, b1, w2}, tolerance);
    }
  }
}

// Backward computes only the gradients asked for: fc2 alone (no dG or dY at all), or x alone.
TEST_P(FusedMlpMatchesUnfused, GradientsOnlyOfInputsThatRequireThem) {
  const double tolerance = dtype() == DType::f64 ? 1e-12 : 1e-5;
  const Tensor x = leaf({5, kIn}, 10), w1 = leaf({kMid, kIn}, 11), b1 = leaf({kMid}, 12);
  const Tensor w2 = leaf({kOut, kMid}, 13);
  const Tensor dz = randn({5, kOut}, 14, 1.0, dtype(), device());
  linear(gelu(linear(x, w1, b1)), w2).backward(dz);

  const Tensor fw2 = copy_of(w2), fx = copy_of(x);
  fused_mlp(x.detach(), w1.detach(), b1.detach(), fw2).backward(dz);
  expect_close(fw2.grad(), w2.grad(), tolerance);
  fused_mlp(fx, w1.detach(), b1.detach(), w2.detach()).backward(dz);
  expect_close(fx.grad(), x.grad(), tolerance);
}

// Rows wide enough that forward and backward run in several row chunks (kFusedMlpScratchBytes
// / (mid * element size): 8 rows of float32, 4 of float64, the last chunk ragged), once with
// fresh gradients and once adding to existing ones. The chunked dW2 sums its 21 rows in another
// order than the one GEMM of the unfused side: 21 terms of magnitude <~ 15, 21 * 15 * eps/2
// relative to max(1, |value|): 2e-5 in float32, 1e-12 in float64 (values are O(10)). dx sums
// 32768 products: a BLAS GEMM blocks that sum differently for 8 rows and for 21 (2.7e-5 relative
// measured with OpenBLAS, about sqrt(32768) eps/2 = 1e-5 expected), so float32 allows 1e-4.
TEST_P(FusedMlpMatchesUnfused, SeveralRowChunksMatchTheUnfusedComposition) {
  const double tolerance = dtype() == DType::f64 ? 1e-12 : 1e-4;
  constexpr std::int64_t kRows = 21, kChunkedMid = 1 << 15;
  const Tensor x = leaf({kRows, kIn}, 22), w1 = leaf({kChunkedMid, kIn}, 23);
  const Tensor b1 = leaf({kChunkedMid}, 24), w2 = leaf({kOut, kChunkedMid}, 25);
  const Tensor dz = randn({kRows, kOut}, 26, 1.0, dtype(), device());
  const Tensor unfused = linear(gelu(linear(x, w1, b1)), w2);
  unfused.backward(dz);
  for (const bool existing : {false, true}) {
    SCOPED_TRACE(existing ? "existing gradients" : "fresh gradients");
    Tensor fx = copy_of(x), fw1 = copy_of(w1), fb1 = copy_of(b1), fw2 = copy_of(w2);
    if (existing) {
      fw1.set_grad(Tensor::zeros(w1.shape(), dtype(), device()));
      fw2.set_grad(Tensor::zeros(w2.shape(), dtype(), device()));
    }
    const Tensor fused = fused_mlp(fx, fw1, fb1, fw2);
    fused.backward(dz);
    expect_matches(fused, unfused, {fx, fw1, fb1, fw2}, {x, w1, b1, w2}, tolerance);
  }
}

// Leaf weights that already hold a gradient (as the views of the data-parallel buffer do) get
// dW added in place by the GEMMs (beta = 1): the storage stays, the value is old + new.
TEST_P(FusedMlpMatchesUnfused, AddsToExistingWeightGradientsInPlace) {
  const double tolerance = dtype() == DType::f64 ? 1e-12 : 1e-5;
  const Tensor x = leaf({2, 3, kIn}, 15), w1 = leaf({kMid, kIn}, 16), b1 = leaf({kMid}, 17);
  const Tensor w2 = leaf({kOut, kMid}, 18);
  const Tensor dz = randn({2, 3, kOut}, 19, 1.0, dtype(), device());
  fused_mlp(x, w1, b1, w2).backward(dz);  // fresh gradients

  const Tensor old_w1 = randn({kMid, kIn}, 20, 1.0, dtype(), device());
  const Tensor old_w2 = randn({kOut, kMid}, 21, 1.0, dtype(), device());
  Tensor aw1 = copy_of(w1), aw2 = copy_of(w2);
  aw1.set_grad(old_w1.clone());
  aw2.set_grad(old_w2.clone());
  const void* storage_w1 = aw1.grad().buffer().data();
  const void* storage_w2 = aw2.grad().buffer().data();
  fused_mlp(x.detach(), aw1, b1.detach(), aw2).backward(dz);
  EXPECT_EQ(aw1.grad().buffer().data(), storage_w1);
  EXPECT_EQ(aw2.grad().buffer().data(), storage_w2);
  NoGradGuard no_grad;
  expect_close(aw1.grad(), add(old_w1, w1.grad()), tolerance);
  expect_close(aw2.grad(), add(old_w2, w2.grad()), tolerance);
}

INSTANTIATE_TEST_SUITE_P(Places, FusedMlpMatchesUnfused, ::mpitron::test::all_devices_and_dtypes(),
                         ::mpitron::test::device_dtype_name);

// The bytes of a float32 [rows, cols] tensor as the caching allocator counts them.
std::size_t block_bytes(std::int64_t rows, std::int64_t cols) {
  return kernels::allocation_class(static_cast<std::size_t>(rows * cols) * sizeof(float));
}

struct MemoryUse {
  std::size_t kept_after_forward;  // in-use bytes the forward added (output + what it saves)
  std::size_t peak;                // peak in-use bytes over forward and backward, above the start
};

// Float32 on the CPU with mid much wider than in and out, as in a transformer MLP, so the
// [rows, mid] tensors dominate; a [rows, mid] tensor (4 MiB) is four times the fused op's
// scratch. x, the weights and dz are allocated before the counters restart.
constexpr std::int64_t kRows = 512, kWideIn = 8, kWideMid = 2048, kWideOut = 8;

template <class Op>
MemoryUse measure(const Op& op) {
  const Tensor x = randn({kRows, kWideIn}, 15).set_requires_grad();
  const Tensor w1 = randn({kWideMid, kWideIn}, 16).set_requires_grad();
  const Tensor b1 = randn({kWideMid}, 17).set_requires_grad();
  const Tensor w2 = randn({kWideOut, kWideMid}, 18).set_requires_grad();
  const Tensor dz = randn({kRows, kWideOut}, 19);
  kernels::reset_allocator_peaks(Device::cpu);
  const std::size_t start = kernels::allocator_stats(Device::cpu).in_use_bytes;
  const Tensor z = op(x, w1, b1, w2);
  const std::size_t after_forward = kernels::allocator_stats(Device::cpu).in_use_bytes;
  z.backward(dz);
  return {after_forward - start, kernels::allocator_stats(Device::cpu).peak_in_use_bytes - start};
}

// Under bfloat16 operands the pre-activation is fc1's product rounded to bfloat16 before its
// bias (Megatron-LM's bfloat16 fc1 output), over row chunks (21 rows of 32768: 8 per chunk):
// the unfused composition that rounds there through round_through_bf16 (forward, and dY in
// backward, which fc1's GEMMs round anyway) gives the same bits for the output and for x's and
// W1's gradients; W2's and b1's gradients sum their 21 rows chunk by chunk instead of in one
// pass (21 terms of magnitude <~ 15 each: 21 * 15 * eps/2 relative to max(1, |value|), 2e-5).
TEST(FusedMlpBf16, RoundsTheProductBeforeTheBiasAsTheComposition) {
  const kernels::GemmOperandsScope operands(kernels::GemmOperands::bfloat16);
  constexpr std::int64_t kRows = 21, kChunkedMid = 1 << 15;
  const auto leaf32 = [](const Shape& shape, std::uint64_t seed) {
    return randn(shape, seed).set_requires_grad();
  };
  const auto copy = [](const Tensor& t) { return t.detach().clone().set_requires_grad(); };
  const Tensor x = leaf32({kRows, kIn}, 31), w1 = leaf32({kChunkedMid, kIn}, 32);
  const Tensor b1 = leaf32({kChunkedMid}, 33), w2 = leaf32({kOut, kChunkedMid}, 34);
  const Tensor dz = randn({kRows, kOut}, 35);
  const Tensor unfused = linear(gelu(add(round_through_bf16(linear(x, w1)), b1)), w2);
  unfused.backward(dz);
  const Tensor fx = copy(x), fw1 = copy(w1), fb1 = copy(b1), fw2 = copy(w2);
  const Tensor fused = fused_mlp(fx, fw1, fb1, fw2);
  fused.backward(dz);
  EXPECT_EQ(fused.to_vector(), unfused.to_vector());
  EXPECT_EQ(fx.grad().to_vector(), x.grad().to_vector());
  EXPECT_EQ(fw1.grad().to_vector(), w1.grad().to_vector());
  expect_close(fw2.grad(), w2.grad(), 2e-5);
  expect_close(fb1.grad(), b1.grad(), 2e-5);
}

// x widened to float32, its float32 gradient handed back as it is: what the TP reduction after a
// row-parallel partial does (nn::reduce_from_tp on one rank's values).
class Widen final : public Function {
 public:
  std::string name() const override { return "widen"; }
  std::vector<Tensor> backward(const Tensor& grad_output) override { return {grad_output}; }
};

Tensor widened(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), DType::f32);
  kernels::convert(x.buffer(), y.buffer());
  return attach(y, std::make_shared<Widen>(), {x});
}

// bf16_output (a row-parallel fc2's partial under train --bf16 at tp > 1): z is the float32
// output rounded once, bit for bit, over several row chunks, and the gradients are the float32
// output's for the same dz. Without bfloat16 operands it is refused.
TEST(FusedMlpBf16, ABfloat16OutputIsTheFloat32OutputRoundedOnce) {
  constexpr std::int64_t kRows = 21, kChunkedMid = 1 << 15;
  const Tensor x = randn({kRows, kIn}, 41).set_requires_grad();
  const Tensor w1 = randn({kChunkedMid, kIn}, 42), b1 = randn({kChunkedMid}, 43);
  const Tensor w2 = randn({kOut, kChunkedMid}, 44);
  EXPECT_THROW(fused_mlp(x, w1, b1, w2, GeluForm::exact, true), std::invalid_argument);
  const kernels::GemmOperandsScope operands(kernels::GemmOperands::bfloat16);
  const Tensor z = fused_mlp(x, w1, b1, w2);
  const Tensor x16 = x.detach().set_requires_grad();
  const Tensor z16 = fused_mlp(x16, w1, b1, w2, GeluForm::exact, true);
  ASSERT_EQ(z16.dtype(), DType::bf16);
  EXPECT_EQ(z16.to_vector(), round_through_bf16(z).to_vector());
  const Tensor dz = randn({kRows, kOut}, 45);
  z.backward(dz);
  widened(z16).backward(dz);
  EXPECT_EQ(x16.grad().to_vector(), x.grad().to_vector());
}

TEST(FusedMlpMemory, KeepsOneRowsByMidTensorLessThanTheUnfusedComposition) {
  const MemoryUse unfused =
      measure([](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
        return linear(gelu(linear(x, w1, b1)), w2);
      });
  const MemoryUse fused = measure([](const Tensor& x, const Tensor& w1, const Tensor& b1,
                                     const Tensor& w2) { return fused_mlp(x, w1, b1, w2); });
  const std::size_t mid = block_bytes(kRows, kWideMid), out = block_bytes(kRows, kWideOut);
  const std::size_t scratch = kFusedMlpScratchBytes;  // 128 rows of 2048 float32
  ASSERT_EQ(mid, 4u << 20);                           // 512 x 2048 float32: a size class of its own
  // After forward the unfused graph holds Y and G = gelu(Y) besides z; the fused op only Y.
  EXPECT_EQ(unfused.kept_after_forward, 2 * mid + out);
  EXPECT_EQ(fused.kept_after_forward, mid + out);
  // The fused op peaks in backward holding Y, its scratch of a row chunk, z and dW2 (about
  // 5.1 MiB); dY overwrites Y, and the scratch is gone before fc1's gradients are allocated. The
  // unfused composition holds Y, G and dG = dz W2 at once in fc2's backward (at least 3
  // [rows, mid] tensors, 12 MiB, with the engine freeing each node's saved tensors after its
  // backward). So the peak drops by at least one [rows, mid] tensor.
  const std::size_t dw2 = block_bytes(kWideOut, kWideMid);
  EXPECT_LE(fused.peak, mid + scratch + out + dw2);
  EXPECT_GE(unfused.peak, fused.peak + mid)
      << "unfused peak " << unfused.peak << " B, fused peak " << fused.peak << " B";
}

}  // namespace
}  // namespace mpitron::test
