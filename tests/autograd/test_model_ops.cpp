// layer_norm, embedding, embedding_slice, cross_entropy and the causal scaled softmax: central-
// difference gradchecks (float64, tolerances in autograd_test_support.h), forward values against
// loops written here, and bad input with its message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd_test_support.h"
#include "kernels/allocator.h"
#include "support/compare.h"
#include "support/cross_entropy_reference.h"
#include "support/loss_backward_memory.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

class ModelOps : public AutogradTest {};

TEST_P(ModelOps, LayerNormGradcheck) {
  EXPECT_TRUE(gradcheck_passes([](const Inputs& in) { return layer_norm(in[0], in[1], in[2]); },
                               {normal({2, 3, 5}, 60, 2.0), normal({5}, 61), normal({5}, 62)}));
}

TEST_P(ModelOps, CausalScaledSoftmaxGradcheckAndMask) {
  const Tensor x = normal({2, 4, 4}, 63, 2.0);
  EXPECT_TRUE(gradcheck_passes([](const Inputs& in) { return softmax(in[0], true, 0.5); }, {x}));
  const std::vector<double> y = softmax(x, true, 0.5).to_vector();
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (i % 4 > (i / 4) % 4) {
      EXPECT_EQ(y[i], 0.0) << "masked element " << i;
    }
  }
}

TEST_P(ModelOps, FusedAttentionGradchecksAndMatchesUnfusedOps) {
  // seq 67 spans two 64-key blocks of the CPU kernel (the second partial), head_dim 3 is odd,
  // seq 1 is a single score; [2, 2, ...] has two leading dims (batch, heads).
  for (const Shape& shape : {Shape{2, 67, 3}, Shape{3, 1, 5}, Shape{2, 2, 5, 4}}) {
    for (const bool causal : {true, false}) {
      SCOPED_TRACE(::testing::Message() << to_string(shape) << " causal " << causal);
      const Inputs in{normal(shape, 66), normal(shape, 67), normal(shape, 68)};
      EXPECT_TRUE(gradcheck_passes(
          [causal](const Inputs& t) {
            return scaled_dot_product_attention(t[0], t[1], t[2], causal);
          },
          in));
      const double scale = 1.0 / std::sqrt(static_cast<double>(shape.back()));
      const Tensor unfused =
          matmul(softmax(matmul(in[0], in[1], false, true), causal, scale), in[2]);
      // float64 both ways; the two differ only in summation order.
      expect_close(scaled_dot_product_attention(in[0], in[1], in[2], causal), unfused, 1e-13);
    }
  }
  const Tensor q = normal({2, 3, 4}, 69);
  EXPECT_THROW(scaled_dot_product_attention(q, normal({2, 4, 4}, 70), q), std::invalid_argument);
  EXPECT_THROW(scaled_dot_product_attention(normal({4}, 71), normal({4}, 71), normal({4}, 71)),
               std::invalid_argument);
}

TEST_P(ModelOps, EmbeddingGathersRowsAndGradchecks) {
  const Tensor weight = normal({5, 3}, 64);
  const Tensor ids = Tensor::from_indices({4, 0, 4, 2, 1, 4}, {2, 3}, device());
  const Tensor out = embedding(weight, ids);
  ASSERT_EQ(out.shape(), (Shape{2, 3, 3}));
  const std::vector<double> w = weight.to_vector(), got = out.to_vector();
  const int rows[] = {4, 0, 4, 2, 1, 4};
  for (int i = 0; i < 6; ++i) {
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(got[i * 3 + c], w[rows[i] * 3 + c]);
  }
  // Index 4 appears three times: its gradient accumulates.
  EXPECT_TRUE(
      gradcheck_passes([ids](const Inputs& in) { return embedding(in[0], ids); }, {weight}));
}

TEST_P(ModelOps, EmbeddingSliceZeroesOtherRowsAndGradchecks) {
  const Tensor weight = normal({3, 2}, 65);  // rows [4, 7) of a larger table
  const Tensor ids = Tensor::from_indices({3, 4, 6, 7, 5, 4}, {6}, device());
  const std::vector<double> got = embedding_slice(weight, ids, 4).to_vector();
  const std::vector<double> w = weight.to_vector();
  const int local[] = {-1, 0, 2, -1, 1, 0};
  for (int i = 0; i < 6; ++i) {
    for (int c = 0; c < 2; ++c)
      EXPECT_EQ(got[i * 2 + c], local[i] < 0 ? 0.0 : w[local[i] * 2 + c]);
  }
  EXPECT_TRUE(gradcheck_passes([ids](const Inputs& in) { return embedding_slice(in[0], ids, 4); },
                               {weight}));
}

// A table whose gradient is already set (a view of the data-parallel buffer, in training) takes
// its rows added into that very tensor, index by index as the loop here adds them, without a
// table-sized temporary; a table without one gets a new gradient of the rows alone.
TEST_P(ModelOps, EmbeddingAddsRowsIntoAGradientTheTableAlreadyHas) {
  constexpr std::int64_t kRows = 1000, kCols = 64;
  const std::vector<std::int64_t> rows{4, 0, 4, 999};
  const Tensor ids = Tensor::from_indices(rows, {4}, device());
  const Tensor dout = normal({4, kCols}, 72), initial = normal({kRows, kCols}, 73);
  const std::vector<double> d = dout.to_vector();
  std::vector<double> added(kRows * kCols, 0.0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t c = 0; c < kCols; ++c)
      added[static_cast<std::size_t>(rows[i] * kCols) + c] += d[i * kCols + c];
  }
  std::vector<double> want = initial.to_vector();
  for (std::size_t i = 0; i < want.size(); ++i)
    want[i] += added[i];

  Tensor weight = normal({kRows, kCols}, 74).set_requires_grad();
  const Tensor grad = initial.clone();
  weight.set_grad(grad);
  const Tensor loss = sum(mul(embedding(weight, ids), dout));
  const std::size_t before = kernels::allocator_stats(device()).in_use_bytes;
  kernels::reset_allocator_peaks(device());
  loss.backward();
  const std::size_t table_bytes = kRows * kCols * sizeof(double);
  EXPECT_LT(kernels::allocator_stats(device()).peak_in_use_bytes, before + table_bytes);
  EXPECT_EQ(weight.grad().buffer().data(), grad.buffer().data());
  expect_close(grad.to_vector(), want, 1e-15);

  Tensor fresh = normal({kRows, kCols}, 74).set_requires_grad();
  sum(mul(embedding(fresh, ids), dout)).backward();
  expect_close(fresh.grad().to_vector(), added, 1e-15);
}

TEST_P(ModelOps, CrossEntropyMatchesLogSumExpAndGradchecks) {
  const Tensor logits = normal({2, 3, 5}, 66, 3.0);
  const Tensor targets = Tensor::from_vector({0, 4, 2, 1, 3, 4}, {2, 3}, DType::i32, device());
  const std::vector<double> l = logits.to_vector();
  const int t[] = {0, 4, 2, 1, 3, 4};
  double want = 0.0;
  for (int r = 0; r < 6; ++r) {
    double sum = 0.0;
    for (int v = 0; v < 5; ++v)
      sum += std::exp(l[r * 5 + v]);
    want += (std::log(sum) - l[r * 5 + t[r]]) / 6.0;
  }
  const Tensor loss = cross_entropy(logits, targets);
  EXPECT_EQ(loss.shape(), Shape{});
  EXPECT_NEAR(loss.item(), want, 1e-13);  // float64, sums of 5 O(20) terms
  EXPECT_TRUE(gradcheck_passes(
      [targets](const Inputs& in) { return cross_entropy(in[0], targets); }, {logits}));
  // Two ignored targets, with the default divisor (the 4 counted) and an explicit one.
  const Tensor some_ignored =
      Tensor::from_vector({0, -1, 2, 1, -1, 4}, {2, 3}, DType::i64, device());
  for (const double divisor : {0.0, 7.0}) {
    EXPECT_TRUE(gradcheck_passes(
        [&](const Inputs& in) { return cross_entropy(in[0], some_ignored, divisor); }, {logits}));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ModelOps, ::mpitron::test::all_devices(),
                         ::mpitron::test::device_dtype_name);

// cross_entropy with ignored targets and a divisor, at float32 and float64, against
// cross_entropy_reference (loops in double) over the dtype-rounded logits.
class CrossEntropyIgnore : public AutogradTest {
 protected:
  // Logits [2, 3, 5] (std 3) in the dtype under test, requiring grad.
  Tensor logits() const {
    return autograd::randn({2, 3, 5}, 67, 3.0, dtype(), device()).set_requires_grad();
  }
  // The tolerance relative to max(1, |value|): 8 eps of the dtype (1e-6 at float32, 1.8e-15 at
  // float64) for exp, log and sums of 5 terms, a few roundings each, in the dtype (sum_exp and
  // the softmax) or in double (the loss); measured at most 4.4e-8 and 1.7e-18.
  double tolerance() const { return 8 * (dtype() == DType::f32 ? 0x1.0p-23 : 0x1.0p-52); }
};

TEST_P(CrossEntropyIgnore, IgnoredTargetsAddNothingAndTheDivisorScales) {
  const std::vector<std::int64_t> t{0, kernels::kIgnoreTarget, 2, 1, kernels::kIgnoreTarget, 4};
  const Tensor targets = Tensor::from_indices(t, {2, 3}, device());
  for (const double divisor : {0.0, 4.0, 10.0}) {
    SCOPED_TRACE(::testing::Message() << "divisor " << divisor);
    Tensor x = logits();
    const CrossEntropyReference want = cross_entropy_reference(x.to_vector(), 5, t, divisor);
    const Tensor loss = cross_entropy(x, targets, divisor);
    expect_close({loss.item()}, {want.loss}, tolerance());
    loss.backward();
    const std::vector<double> grad = x.grad().to_vector();
    expect_close(grad, want.grad, tolerance());
    for (const std::size_t r : {std::size_t{1}, std::size_t{4}}) {
      for (std::size_t v = 0; v < 5; ++v)
        EXPECT_EQ(grad[r * 5 + v], 0.0) << "ignored row " << r;
    }
  }
}

TEST_P(CrossEntropyIgnore, AllTargetsIgnoredGiveZeroLossAndGradient) {
  const Tensor targets =
      Tensor::from_indices(std::vector<std::int64_t>(6, kernels::kIgnoreTarget), {2, 3}, device());
  for (const double divisor : {0.0, 3.0}) {
    Tensor x = logits();
    const Tensor loss = cross_entropy(x, targets, divisor);
    EXPECT_EQ(loss.item(), 0.0) << "divisor " << divisor;
    loss.backward();
    for (const double g : x.grad().to_vector())
      EXPECT_EQ(g, 0.0) << "divisor " << divisor;
  }
}

INSTANTIATE_TEST_SUITE_P(Places, CrossEntropyIgnore, ::mpitron::test::all_devices_and_dtypes(),
                         ::mpitron::test::device_dtype_name);

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no exception";
}

TEST(ModelOpsBadInput, MessagesNameTheOpAndTheValues) {
  const Tensor x = Tensor::zeros({2, 4}), w3 = Tensor::zeros({3}), w4 = Tensor::zeros({4});
  EXPECT_EQ(message_of([&] { layer_norm(x, w3, w4); }),
            "layer_norm: weight [3] does not match the last dim of x [2, 4]");
  EXPECT_EQ(message_of([&] { layer_norm(x, w4, w3); }),
            "layer_norm: bias [3] does not match the last dim of x [2, 4]");
  const Tensor table = Tensor::zeros({5, 2});
  EXPECT_EQ(message_of([&] {
              embedding(table, Tensor::from_indices({1, 5, -1}, {3}));
            }),
            "embedding: index 5 at position 1 of indices [3] is outside [0, 5)");
  EXPECT_EQ(message_of([&] { embedding(table, Tensor::zeros({2})); }),
            "embedding: indices must be int32 or int64 on cpu, got float32 on cpu");
  const Tensor logits = Tensor::zeros({2, 3, 4});
  EXPECT_EQ(message_of([&] {
              cross_entropy(logits, Tensor::from_indices({0, 1, 2, 3, 4, 0}, {2, 3}));
            }),
            "cross_entropy: target 4 at position 4 of targets [2, 3] is outside [0, 4)");
  EXPECT_EQ(message_of([&] {
              cross_entropy(logits, Tensor::from_indices({0, -1, 2, -100, 3, 0}, {2, 3}));
            }),
            "cross_entropy: target -100 at position 3 of targets [2, 3] is outside [0, 4)");
  EXPECT_EQ(message_of([&] {
              cross_entropy(logits, Tensor::from_indices({0, 1, 2, 3, 0, 1}, {2, 3}), -2.0);
            }),
            "cross_entropy: divisor must be a finite number >= 0 (0: the count of targets not "
            "ignored), got -2");
  EXPECT_EQ(message_of([&] {
              cross_entropy(logits, Tensor::from_indices({0, 1}, {2}));
            }),
            "cross_entropy: targets [2] do not match the leading dims of logits [2, 3, 4]");
  EXPECT_EQ(message_of([&] { softmax(logits, true); }),
            "softmax: causal needs square [..., n, n] scores, got [2, 3, 4]");
}

// The backward writes the logit gradient over logits that only the loss still holds (the same
// gradients as when the caller holds them, and one [rows, vocab] buffer less at the peak), and
// leaves held logits as they were.
TEST(CrossEntropyBackward, OverwritesLogitsNoOtherTensorHolds) {
  constexpr std::size_t kRows = 6, kIn = 8, kVocab = 50;
  const Tensor targets = Tensor::from_indices({3, 49, kernels::kIgnoreTarget, 0, 17, 8}, {6});
  const auto loss = [&](const Tensor& logits) { return cross_entropy(logits, targets); };
  const LossBackward held = loss_backward(kRows, kIn, kVocab, loss, /*hold_logits=*/true);
  const LossBackward alone = loss_backward(kRows, kIn, kVocab, loss, /*hold_logits=*/false);
  EXPECT_TRUE(held.logits_unchanged);
  EXPECT_EQ(alone.grad_x, held.grad_x);
  EXPECT_EQ(alone.grad_w, held.grad_w);
  EXPECT_GE(held.peak_above_start, alone.peak_above_start + kRows * kVocab * sizeof(float));
}

}  // namespace
}  // namespace mpitron::test
