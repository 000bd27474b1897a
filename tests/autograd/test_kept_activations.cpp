// The ops that keep an activation rounded for backward under kernels::GemmOperands::bfloat16
// (autograd::detail::keep_activation): layer_norm its xhat, rms_norm its input, swiglu its gate
// and up. Their gradients equal, bit for bit, the float32 kernels' backward given those tensors
// rounded (and, for the normalizations, the statistics of the unrounded input), and differ from
// the unrounded ones'; under float32 operands they are the unrounded ones'. LayerNorm's stay
// within 2^-7 of float32's on rows whose mean is 1000 times their spread. What they keep is 2
// bytes an element (the allocator's counters), and nothing without grad mode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "kernels/allocator.h"
#include "kernels/llama_ops.h"
#include "kernels/ops.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

using kernels::GemmOperands;
using kernels::GemmOperandsScope;

constexpr std::int64_t kRows = 64, kCols = 96;
constexpr double kEps = 1e-5;

// x rounded to bfloat16 and widened (float32 values), or x itself.
Tensor as_kept(const Tensor& x, bool rounded) {
  if (!rounded) return x;
  Tensor r = Tensor::empty(x.shape());
  kernels::round_to_bf16(x.buffer(), r.buffer());
  return r;
}

// The op's gradients (autograd, under `precision`) against its kernel's backward on the inputs
// as kept; `grads(rounded)` runs that kernel and returns what the op's inputs receive.
template <class Grads>
void expect_kernel_grads(GemmOperands precision, const std::vector<Tensor>& autograd_grads,
                         const Grads& grads) {
  const bool bf16 = precision == GemmOperands::bfloat16;
  const std::vector<Tensor> want = grads(bf16);
  ASSERT_EQ(want.size(), autograd_grads.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(autograd_grads[i].to_vector(), want[i].to_vector());
  }
  if (bf16) {
    EXPECT_NE(autograd_grads[0].to_vector(), grads(false)[0].to_vector())
        << "the rounding changes the first input's gradient";
  }
}

TEST(KeptActivation, LayerNormDifferentiatesFromItsXhatRounded) {
  const Tensor b = randn({kCols}, 3), dy = randn({kRows, kCols}, 4);
  for (const GemmOperands precision : {GemmOperands::float32, GemmOperands::bfloat16}) {
    const Tensor w = randn({kCols}, 2, 0.5).set_requires_grad();
    const Tensor x = randn({kRows, kCols}, 1).set_requires_grad();
    {
      const GemmOperandsScope operands(precision);
      layer_norm(x, w, b, kEps).backward(dy);
    }
    Tensor y = Tensor::empty({kRows, kCols}), xhat = Tensor::empty({kRows, kCols}),
           rstd = Tensor::empty({kRows});
    kernels::layer_norm_forward(x.buffer(), w.buffer(), b.buffer(), kCols, kEps, y.buffer(),
                                xhat.buffer(), rstd.buffer());
    expect_kernel_grads(precision, {x.grad(), w.grad()}, [&](bool rounded) {
      Tensor dx = Tensor::empty({kRows, kCols}), dw = Tensor::empty({kCols}),
             db = Tensor::empty({kCols});
      kernels::layer_norm_backward(as_kept(xhat, rounded).buffer(), w.buffer(), rstd.buffer(),
                                   dy.buffer(), kCols, dx.buffer(), dw.buffer(), db.buffer());
      return std::vector<Tensor>{dx, dw};
    });
  }
}

// ||a - b|| / ||b||.
double relative_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> av = a.to_vector(), bv = b.to_vector();
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < av.size(); ++i) {
    diff += (av[i] - bv[i]) * (av[i] - bv[i]);
    norm += bv[i] * bv[i];
  }
  return std::sqrt(diff / norm);
}

// Rows of mean 1000 and spread 1, as a residual stream can hold: rounding x would move xhat by up
// to 2^-9 * 1000 (its gradient by more than itself); rounding xhat moves each element by at most
// 2^-9 of itself, and dx, a sum of three such terms, by a few times that: 2^-7 bounds it.
TEST(KeptActivation, LayerNormGradientStaysCloseWhenTheMeanDwarfsTheSpread) {
  const Tensor b = randn({kCols}, 3), dy = randn({kRows, kCols}, 4);
  const Tensor x = add(randn({kRows, kCols}, 1), Tensor::full({kRows, kCols}, 1000.0));
  std::vector<Tensor> grads;
  for (const GemmOperands precision : {GemmOperands::float32, GemmOperands::bfloat16}) {
    const Tensor w = randn({kCols}, 2, 0.5).set_requires_grad();
    const Tensor leaf = x.detach().set_requires_grad();
    {
      const GemmOperandsScope operands(precision);
      layer_norm(leaf, w, b, kEps).backward(dy);
    }
    grads.push_back(leaf.grad());
    grads.push_back(w.grad());
  }
  EXPECT_LT(relative_error(grads[2], grads[0]), 0x1p-7) << "dx";
  EXPECT_LT(relative_error(grads[3], grads[1]), 0x1p-7) << "dweight";
  EXPECT_GT(relative_error(grads[2], grads[0]), 0.0) << "dx must see the rounding";
}

TEST(KeptActivation, RmsNormDifferentiatesFromItsInputRounded) {
  const Tensor dy = randn({kRows, kCols}, 14);
  for (const GemmOperands precision : {GemmOperands::float32, GemmOperands::bfloat16}) {
    const Tensor w = randn({kCols}, 12, 0.5).set_requires_grad();
    const Tensor x = randn({kRows, kCols}, 11).set_requires_grad();
    {
      const GemmOperandsScope operands(precision);
      rms_norm(x, w, kEps).backward(dy);
    }
    Tensor y = Tensor::empty({kRows, kCols}), rstd = Tensor::empty({kRows});
    kernels::rms_norm_forward(x.buffer(), w.buffer(), kCols, kEps, y.buffer(), rstd.buffer());
    expect_kernel_grads(precision, {x.grad(), w.grad()}, [&](bool rounded) {
      Tensor dx = Tensor::empty({kRows, kCols}), dw = Tensor::empty({kCols});
      kernels::rms_norm_backward(as_kept(x.detach(), rounded).buffer(), w.buffer(), rstd.buffer(),
                                 dy.buffer(), kCols, dx.buffer(), dw.buffer());
      return std::vector<Tensor>{dx, dw};
    });
  }
}

TEST(KeptActivation, SwigluDifferentiatesFromGateAndUpRounded) {
  const Tensor dy = randn({kRows, kCols}, 23);
  for (const GemmOperands precision : {GemmOperands::float32, GemmOperands::bfloat16}) {
    const Tensor gate = randn({kRows, kCols}, 21).set_requires_grad(),
                 up = randn({kRows, kCols}, 22).set_requires_grad();
    {
      const GemmOperandsScope operands(precision);
      swiglu(gate, up).backward(dy);
    }
    expect_kernel_grads(precision, {gate.grad(), up.grad()}, [&](bool rounded) {
      Tensor dgate = Tensor::empty({kRows, kCols}), dup = Tensor::empty({kRows, kCols});
      kernels::swiglu_backward(as_kept(gate.detach(), rounded).buffer(),
                               as_kept(up.detach(), rounded).buffer(), dy.buffer(), dgate.buffer(),
                               dup.buffer());
      return std::vector<Tensor>{dgate, dup};
    });
  }
}

std::size_t bytes_of(std::int64_t elements, DType dtype) {
  return kernels::allocation_class(static_cast<std::size_t>(elements) * kernels::dtype_size(dtype));
}

// In-use bytes after op(x) with x released, above what was in use before x was made, less the
// output. x needs a gradient when `leaf_grad` (then the graph holds it, to receive one).
template <class Op>
std::size_t kept_after_forward(GemmOperands precision, bool grad_mode, bool leaf_grad,
                               const Op& op) {
  const GemmOperandsScope operands(precision);
  const GradModeGuard mode(grad_mode);
  const std::size_t start = kernels::allocator_stats(Device::cpu).in_use_bytes;
  Tensor out;
  {
    const Tensor x = randn({kRows, kCols}, 31).set_requires_grad(leaf_grad);
    out = op(x);
  }
  return kernels::allocator_stats(Device::cpu).in_use_bytes - start -
         bytes_of(kRows * kCols, DType::f32);
}

TEST(KeptActivation, NormalizationsKeepBfloat16AndNothingWithoutGradMode) {
  const Tensor w = randn({kCols}, 32).set_requires_grad(), b = randn({kCols}, 33);
  const auto ln = [&](const Tensor& x) { return layer_norm(x, w, b, kEps); };
  const auto rms = [&](const Tensor& x) { return rms_norm(x, w, kEps); };
  const auto gated = [&](const Tensor& x) { return swiglu(x, x); };
  const std::size_t stat = bytes_of(kRows, DType::f32);
  for (const GemmOperands precision : {GemmOperands::float32, GemmOperands::bfloat16}) {
    SCOPED_TRACE(precision == GemmOperands::bfloat16 ? "bfloat16 operands" : "float32 operands");
    const DType kept = precision == GemmOperands::bfloat16 ? DType::bf16 : DType::f32;
    const std::size_t input = bytes_of(kRows * kCols, kept);
    EXPECT_EQ(kept_after_forward(precision, true, false, ln), input + stat);
    EXPECT_EQ(kept_after_forward(precision, true, false, rms), input + stat);
    // swiglu(x, x) with x a leaf that needs a gradient: the graph holds x, and swiglu keeps
    // gate and up (x itself, or two bfloat16 copies of it).
    const std::size_t leaf = bytes_of(kRows * kCols, DType::f32);
    EXPECT_EQ(kept_after_forward(precision, true, true, gated),
              precision == GemmOperands::bfloat16 ? leaf + 2 * input : leaf);
    EXPECT_EQ(kept_after_forward(precision, false, false, ln), 0u);
  }
}

}  // namespace
}  // namespace mpitron::test
