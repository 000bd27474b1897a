// The vocab-parallel cross-entropy on every rank of a TP group spanning the world (tp 1, 2, 4)
// against cross_entropy_reference (loops in double over the dense logits): ignored targets, the
// divisor, the all-ignored shard, and bad targets or divisors rejected on every rank alike.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "kernels/ops.h"
#include "nn/layers/vocab_parallel.h"
#include "nn/parameter.h"
#include "nn_test_support.h"
#include "support/cross_entropy_reference.h"
#include "support/loss_backward_memory.h"

namespace mpitron::nn {
namespace {

using autograd::Tensor;

// V = 13 in a padded vocabulary of 16 columns (split 16, 8 | 8, 4 x 4: at tp 4 the last slice
// holds one used column); targets [2, 3] on slice boundaries (0, 7 | 8, 12) and two ignored.
constexpr std::int64_t kVocab = 13, kPadded = 16;
const std::vector<std::int64_t> kTargets{0, kernels::kIgnoreTarget, 12,
                                         8, kernels::kIgnoreTarget, 7};

// Full logits [2, 3, kPadded] with std 3 in `dtype`; the padding columns hold 1e4, above every
// logit, so any use of them in the max, the sums or the gradient shows.
std::vector<double> full_logits(autograd::DType dtype) {
  std::vector<double> values = autograd::randn({2, 3, kPadded}, 81, 3.0, dtype).to_vector();
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (static_cast<std::int64_t>(i) % kPadded >= kVocab) values[i] = 1e4;
  }
  return values;
}

// The first kVocab columns of each row of [rows, kPadded] values.
std::vector<double> used_columns(const std::vector<double>& values) {
  std::vector<double> out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (static_cast<std::int64_t>(i) % kPadded < kVocab) out.push_back(values[i]);
  }
  return out;
}

// Relative to max(1, |value|): 8 eps of the dtype (1e-6 at float32, 1.8e-15 at float64) for exp,
// log and sums of 13 terms, a few roundings each, and the order of the all-reduced sums; measured
// at np 2 at most 2.8e-8 and 2.8e-17.
double tolerance(autograd::DType dtype) {
  return 8 * (dtype == autograd::DType::f32 ? 0x1.0p-23 : 0x1.0p-52);
}

TEST(VocabParallelCrossEntropy, IgnoredTargetsAndTheDivisorMatchTheReference) {
  const comm::Communicator& tp = test::world();
  const std::int64_t cols = kPadded / tp.size(), first = cols * tp.rank();
  const Tensor targets = Tensor::from_indices(kTargets, {2, 3});
  for (const autograd::DType dtype : {autograd::DType::f32, autograd::DType::f64}) {
    const std::vector<double> values = full_logits(dtype);
    const Tensor full = Tensor::from_vector(values, {2, 3, kPadded}, dtype);
    for (const double divisor : {0.0, 10.0}) {
      SCOPED_TRACE(::testing::Message() << kernels::to_string(dtype) << ", divisor " << divisor);
      const test::CrossEntropyReference want =
          test::cross_entropy_reference(used_columns(values), kVocab, kTargets, divisor);
      Tensor logits = shard(full, 2, tp.rank(), tp.size(), "logits");
      const Tensor loss = vocab_parallel_cross_entropy(logits, targets, kVocab, tp, divisor);
      test::expect_close({loss.item()}, {want.loss}, tolerance(dtype));
      loss.backward();
      std::vector<double> want_grad;  // this rank's columns, 0 in the padding
      for (std::size_t r = 0; r < kTargets.size(); ++r) {
        for (std::int64_t c = first; c < first + cols; ++c) {
          want_grad.push_back(c < kVocab ? want.grad[r * kVocab + static_cast<std::size_t>(c)]
                                         : 0.0);
        }
      }
      const std::vector<double> grad = logits.grad().to_vector();
      test::expect_close(grad, want_grad, tolerance(dtype));
      for (const std::size_t r : {std::size_t{1}, std::size_t{4}}) {
        for (std::int64_t c = 0; c < cols; ++c)
          EXPECT_EQ(grad[r * static_cast<std::size_t>(cols) + static_cast<std::size_t>(c)], 0.0)
              << "ignored row " << r;
      }
    }
  }
}

// A shard whose targets are all ignored (a context-parallel rank holding only padding): loss 0
// and gradient 0 exactly, with the default divisor (0 counted) and an explicit one.
TEST(VocabParallelCrossEntropy, AllTargetsIgnoredGiveZeroLossAndGradient) {
  const comm::Communicator& tp = test::world();
  const Tensor targets =
      Tensor::from_indices(std::vector<std::int64_t>(6, kernels::kIgnoreTarget), {2, 3});
  const Tensor full = Tensor::from_vector(full_logits(autograd::DType::f32), {2, 3, kPadded});
  for (const double divisor : {0.0, 5.0}) {
    Tensor logits = shard(full, 2, tp.rank(), tp.size(), "logits");
    const Tensor loss = vocab_parallel_cross_entropy(logits, targets, kVocab, tp, divisor);
    EXPECT_EQ(loss.item(), 0.0) << "divisor " << divisor;
    loss.backward();
    for (const double g : logits.grad().to_vector())
      EXPECT_EQ(g, 0.0) << "divisor " << divisor;
  }
}

// Raised on every rank before any communication (the same targets everywhere), so no rank hangs.
TEST(VocabParallelCrossEntropy, RejectsOtherTargetsNegativeDivisorsAndFloatTargets) {
  const comm::Communicator& tp = test::world();
  const Tensor logits = Tensor::zeros({2, 3, kPadded / tp.size()});
  const auto message = [&](const Tensor& targets, double divisor) -> std::string {
    try {
      vocab_parallel_cross_entropy(logits, targets, kVocab, tp, divisor);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no exception";
  };
  const auto ids = [](const std::vector<std::int64_t>& t) {
    return Tensor::from_indices(t, {2, 3});
  };
  EXPECT_EQ(message(ids({0, -1, 2, -2, 13, 0}), 0.0),
            "vocab_parallel_cross_entropy: target -2 at position 3 of targets [2, 3] is outside "
            "[0, 13)");
  EXPECT_EQ(message(ids({0, -1, 2, 3, 13, 0}), 0.0),
            "vocab_parallel_cross_entropy: target 13 at position 4 of targets [2, 3] is outside "
            "[0, 13)");
  EXPECT_EQ(message(ids(kTargets), -1.0),
            "vocab_parallel_cross_entropy: divisor must be a finite number >= 0 (0: the count of "
            "targets not ignored), got -1");
  EXPECT_EQ(message(Tensor::zeros({2, 3}), 0.0),
            "vocab_parallel_cross_entropy: targets must be int32 or int64, got float32");
}

// The backward writes this rank's logit gradient over its logits when only the loss still holds
// them: the same gradients as when the caller holds them, one [rows, Vp/tp] buffer less at the
// peak, and held logits left as they were.
TEST(VocabParallelCrossEntropy, OverwritesLogitsNoOtherTensorHolds) {
  const comm::Communicator& tp = test::world();
  const auto cols = static_cast<std::size_t>(kPadded / tp.size());
  const Tensor targets = Tensor::from_indices(kTargets, {6});
  const auto loss = [&](const Tensor& logits) {
    return vocab_parallel_cross_entropy(logits, targets, kVocab, tp);
  };
  const test::LossBackward held = test::loss_backward(6, 5, cols, loss, /*hold_logits=*/true);
  const test::LossBackward alone = test::loss_backward(6, 5, cols, loss, /*hold_logits=*/false);
  EXPECT_TRUE(held.logits_unchanged);
  EXPECT_EQ(alone.grad_x, held.grad_x);
  EXPECT_EQ(alone.grad_w, held.grad_w);
  EXPECT_GE(held.peak_above_start, alone.peak_above_start + 6 * cols * sizeof(float));
}

// A tensor's values as a new tensor of `dtype` (float32 <-> bfloat16, kernels::convert).
Tensor converted(const Tensor& t, autograd::DType dtype) {
  Tensor out = Tensor::empty(t.shape(), dtype, t.device());
  kernels::convert(t.buffer(), out.buffer());
  return out;
}

// bfloat16 logits (a --bf16 run's head, autograd::linear_bf16_output) are read widened, in row
// chunks (120 rows of 48000 columns at np 1 take two 16 MiB chunks): the loss is, bit for bit,
// that of their float32 values, and the head's gradients are those of that loss's logit
// gradient rounded to bfloat16 (which overwrites the logits: the loss holds them alone).
TEST(VocabParallelCrossEntropy, Bfloat16LogitsGiveTheLossOfTheirFloat32Values) {
  const comm::Communicator& tp = test::world();
  constexpr std::int64_t kRows = 120, kIn = 8, kWide = 48000, kWideVocab = 47990;
  const std::int64_t cols = kWide / tp.size();
  std::vector<std::int64_t> ids(kRows);
  for (std::int64_t r = 0; r < kRows; ++r)
    ids[static_cast<std::size_t>(r)] = r == 5 ? kernels::kIgnoreTarget : (r * 7919) % kWideVocab;
  const Tensor targets = Tensor::from_indices(ids, {kRows});
  const Tensor x = autograd::randn({kRows, kIn}, 83, 2.0).set_requires_grad();
  const Tensor w = autograd::randn({cols, kIn}, 84 + tp.rank()).set_requires_grad();
  Tensor logits16 = autograd::linear_bf16_output(x, w);
  const Tensor logits32 = converted(logits16, autograd::DType::f32).set_requires_grad();
  const Tensor loss16 = vocab_parallel_cross_entropy(logits16, targets, kWideVocab, tp);
  logits16 = Tensor();
  const Tensor loss32 = vocab_parallel_cross_entropy(logits32, targets, kWideVocab, tp);
  EXPECT_EQ(loss16.dtype(), autograd::DType::f32);
  EXPECT_EQ(loss16.item(), loss32.item());
  loss16.backward();
  loss32.backward();
  const Tensor x_want = x.detach().set_requires_grad(), w_want = w.detach().set_requires_grad();
  autograd::linear_bf16_output(x_want, w_want)
      .backward(converted(logits32.grad(), autograd::DType::bf16));
  EXPECT_EQ(x.grad().to_vector(), x_want.grad().to_vector());
  EXPECT_EQ(w.grad().to_vector(), w_want.grad().to_vector());
}

}  // namespace
}  // namespace mpitron::nn
