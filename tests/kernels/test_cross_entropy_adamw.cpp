// Cross-entropy (whole vocabulary and split into slices), AdamW and the sum of squares against
// naive loops written here (long double for the cross-entropy reference).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernel_test_support.h"

namespace mpitron::test {
using namespace ::mpitron::kernels;
namespace {

constexpr std::size_t kRows = 6, kVocab = 37;

// Row 0 random, row 1 all equal, rows 2 and 3 of magnitude 1e4 (3 within 1e4 + [0, 4)), rows 4
// and 5 random; targets at both ends of the vocabulary and inside it.
struct CrossEntropyCase {
  std::vector<double> logits;
  std::vector<std::int64_t> targets{3, 0, 36, 20, 19, 36};
};

class LossKernelTest : public KernelTest {
 protected:
  CrossEntropyCase make_case() const {
    CrossEntropyCase c;
    c.logits = random(kRows * kVocab, 50, -3.0, 3.0);
    const std::vector<double> large = random(kVocab, 51, -1e4, 1e4);
    const std::vector<double> near = random(kVocab, 52, 1e4, 1e4 + 4.0);
    for (std::size_t v = 0; v < kVocab; ++v) {
      c.logits[1 * kVocab + v] = 2.5;
      c.logits[2 * kVocab + v] = large[v];
      c.logits[3 * kVocab + v] = near[v];
    }
    return c;
  }

  // The loss kernels on the whole vocabulary of `c` (targets as `index_dtype`, dloss 0.7,
  // `divisor`): the loss [1], the logit gradient and each row's target logit.
  struct CrossEntropyRun {
    Buffer loss, grad, target_logit;
  };
  CrossEntropyRun run_cross_entropy(const CrossEntropyCase& c, DType index_dtype,
                                    double divisor) const {
    const Buffer logits = make(c.logits), targets = make_indices(c.targets, index_dtype);
    Buffer max = empty(kRows), sum_exp = empty(kRows);
    CrossEntropyRun run{empty(1), empty(c.logits.size()), empty(kRows)};
    row_max(logits, kVocab, kVocab, max);
    cross_entropy_stats(logits, kVocab, kVocab, targets, 0, max, sum_exp, run.target_logit);
    cross_entropy_loss(max, sum_exp, run.target_logit, targets, divisor, run.loss);
    cross_entropy_backward(logits, kVocab, kVocab, targets, 0, max, sum_exp, make({0.7}), divisor,
                           run.grad);
    return run;
  }
};
MPITRON_KERNEL_TEST_SUITE(LossKernelTest);

// loss = sum over the counted rows (target not kIgnoreTarget) of logsumexp(row r) - logit of
// its target, over `divisor` (0: the count of counted rows; the loss is 0 when there are none);
// dlogits = dloss / divisor (softmax - onehot) on counted rows, 0 on ignored ones; in long double.
void reference(const CrossEntropyCase& c, double dloss, double& loss, std::vector<double>& grad,
               double divisor = 0.0) {
  if (divisor == 0.0) {
    divisor = static_cast<double>(std::count_if(c.targets.begin(), c.targets.end(),
                                                [](std::int64_t t) { return t != kIgnoreTarget; }));
  }
  const long double scale = divisor > 0.0 ? 1.0L / divisor : 0.0L;
  long double total = 0.0L;
  grad.assign(c.logits.size(), 0.0);
  for (std::size_t r = 0; r < kRows; ++r) {
    if (c.targets[r] == kIgnoreTarget) continue;
    const auto row = c.logits.begin() + static_cast<std::ptrdiff_t>(r * kVocab);
    const long double max = *std::max_element(row, row + kVocab);
    long double sum = 0.0L;
    for (std::size_t v = 0; v < kVocab; ++v)
      sum += std::exp(static_cast<long double>(row[v]) - max);
    const auto target = static_cast<std::size_t>(c.targets[r]);
    total += std::log(sum) + max - row[target];
    for (std::size_t v = 0; v < kVocab; ++v) {
      const long double p = std::exp(static_cast<long double>(row[v]) - max) / sum;
      grad[r * kVocab + v] = static_cast<double>(dloss * scale * (p - (v == target ? 1 : 0)));
    }
  }
  loss = static_cast<double>(total * scale);
}

// Columns [first, first + width) of [kRows, kVocab] values.
std::vector<double> columns(const std::vector<double>& values, std::size_t first,
                            std::size_t width) {
  std::vector<double> out;
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t v = first; v < first + width; ++v)
      out.push_back(values[r * kVocab + v]);
  }
  return out;
}

TEST_P(LossKernelTest, CrossEntropyMatchesLogSumExpIncludingLargeAndEqualLogits) {
  const CrossEntropyCase c = make_case();
  double want_loss = 0.0;
  std::vector<double> want_grad;
  reference(c, 0.7, want_loss, want_grad);
  for (const DType index_dtype : {DType::i32, DType::i64}) {
    SCOPED_TRACE(to_string(index_dtype));
    const auto [loss, grad, target_logit] = run_cross_entropy(c, index_dtype, kRows);
    // The equal row is log(37) exactly; the 1e4 rows subtract logits exactly (Sterbenz) or
    // underflow; what remains is exp/log rounding and sum_exp stored in the dtype: 8 eps of
    // max(1, |loss|) (the loss is ~1e4 here).
    expect_close(host_values(loss), {want_loss}, 8 * eps());
    // exp(l - max) / sum_exp: a few roundings of values <= 1, times dloss / rows.
    expect_close(host_values(grad), want_grad, 8 * eps());
    const std::vector<double> got = host_values(grad);
    EXPECT_EQ(got[1 * kVocab + 5], got[1 * kVocab + 6]);  // equal logits, equal gradients
  }
}

// The vocabulary split 0..16 | 17..36 as two tensor-parallel ranks would hold it: with the
// global row max, the sums of the slices' statistics give the full loss, and each slice's
// gradient is its columns of the full gradient. Targets sit on both sides of the boundary.
TEST_P(LossKernelTest, VocabSlicesSumToTheFullCrossEntropy) {
  CrossEntropyCase c = make_case();
  c.targets = {17, 0, 36, 16, 19, 17};
  double want_loss = 0.0;
  std::vector<double> want_grad;
  reference(c, 1.0, want_loss, want_grad);
  Buffer max = empty(kRows);
  row_max(make(c.logits), kVocab, kVocab, max);
  const Buffer targets = make_indices(c.targets, DType::i64);
  const std::size_t first[] = {0, 17}, width[] = {17, 20};
  std::vector<double> sum_exp(kRows, 0.0), target_logit(kRows, 0.0);
  for (int s = 0; s < 2; ++s) {
    Buffer part_sum = empty(kRows), part_target = empty(kRows);
    cross_entropy_stats(make(columns(c.logits, first[s], width[s])), width[s], width[s], targets,
                        static_cast<std::int64_t>(first[s]), max, part_sum, part_target);
    const std::vector<double> sums = host_values(part_sum), targets_here = host_values(part_target);
    for (std::size_t r = 0; r < kRows; ++r) {
      sum_exp[r] += sums[r];
      target_logit[r] += targets_here[r];  // exactly one slice holds the target
    }
  }
  Buffer loss = empty(1);
  const Buffer full_sum_exp = make(sum_exp);
  cross_entropy_loss(max, full_sum_exp, make(target_logit), targets, kRows, loss);
  // As in the whole-vocabulary test, plus one rounding of the two-term sums.
  expect_close(host_values(loss), {want_loss}, 8 * eps());
  for (int s = 0; s < 2; ++s) {
    Buffer grad = empty(kRows * width[s]);
    cross_entropy_backward(make(columns(c.logits, first[s], width[s])), width[s], width[s], targets,
                           static_cast<std::int64_t>(first[s]), max, full_sum_exp, make({1.0}),
                           kRows, grad);
    expect_close(host_values(grad), columns(want_grad, first[s], width[s]), 8 * eps());
  }
}

// llm.c's padded vocabulary: the 37 columns followed by 11 padding columns of 1e5 (larger than
// every logit, so any use of them in the max, the sum or the gradient shows) give the loss and
// gradient of the 37 columns alone, and a zero gradient in the padding. A slice whose columns are
// all padding (used_cols 0) contributes nothing: max the lowest value, sums 0, gradient 0.
TEST_P(LossKernelTest, PaddingColumnsTakeNoPart) {
  constexpr std::size_t kPadded = kVocab + 11;
  const CrossEntropyCase c = make_case();
  double want_loss = 0.0;
  std::vector<double> want_grad;
  reference(c, 0.7, want_loss, want_grad);
  std::vector<double> padded(kRows * kPadded, 1e5);
  for (std::size_t r = 0; r < kRows; ++r)
    std::copy_n(c.logits.begin() + static_cast<std::ptrdiff_t>(r * kVocab), kVocab,
                padded.begin() + static_cast<std::ptrdiff_t>(r * kPadded));
  const Buffer logits = make(padded), targets = make_indices(c.targets, DType::i64);
  Buffer max = empty(kRows), sum_exp = empty(kRows), target_logit = empty(kRows);
  Buffer loss = empty(1), grad = empty(padded.size());
  row_max(logits, kPadded, kVocab, max);
  cross_entropy_stats(logits, kPadded, kVocab, targets, 0, max, sum_exp, target_logit);
  cross_entropy_loss(max, sum_exp, target_logit, targets, kRows, loss);
  cross_entropy_backward(logits, kPadded, kVocab, targets, 0, max, sum_exp, make({0.7}), kRows,
                         grad);
  expect_close(host_values(loss), {want_loss}, 8 * eps());  // as the whole-vocabulary test
  const std::vector<double> got = host_values(grad);
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t v = 0; v < kPadded; ++v) {
      const double want = v < kVocab ? want_grad[r * kVocab + v] : 0.0;
      EXPECT_NEAR(got[r * kPadded + v], want, 8 * eps()) << "row " << r << " column " << v;
    }
  }
  Buffer none_max = empty(kRows), none_sum = empty(kRows), none_target = empty(kRows);
  Buffer none_grad = empty(padded.size());
  row_max(logits, kPadded, 0, none_max);
  for (const double m : host_values(none_max))
    EXPECT_LT(m, -1e30);
  cross_entropy_stats(logits, kPadded, 0, targets, 0, max, none_sum, none_target);
  cross_entropy_backward(logits, kPadded, 0, targets, 0, max, sum_exp, make({0.7}), kRows,
                         none_grad);
  for (const auto& values :
       {host_values(none_sum), host_values(none_target), host_values(none_grad)}) {
    for (const double value : values)
      EXPECT_EQ(value, 0.0);
  }
}

// kIgnoreTarget rows add nothing to the loss and get zero gradient rows: the all-equal row and
// the row spread over +-1e4 (its loss is ~1e4, so any leak shows) are ignored, with the count of
// the other four rows as the divisor (what the op layers pass by default) and an explicit 10 (a
// context-parallel shard's global token count).
TEST_P(LossKernelTest, IgnoredTargetsAddNothingAndGetZeroGradientRows) {
  CrossEntropyCase c = make_case();
  c.targets = {3, kIgnoreTarget, kIgnoreTarget, 20, 19, 36};
  for (const double divisor : {4.0, 10.0}) {
    double want_loss = 0.0;
    std::vector<double> want_grad;
    reference(c, 0.7, want_loss, want_grad, divisor);
    for (const DType index_dtype : {DType::i32, DType::i64}) {
      SCOPED_TRACE(::testing::Message() << to_string(index_dtype) << ", divisor " << divisor);
      const auto [loss, grad, target_logit] = run_cross_entropy(c, index_dtype, divisor);
      // As the whole-vocabulary test, but the loss is ~5 now while row 3's term is still the
      // difference of two logits near 1e4, rounded in double at that magnitude: 2^-52 1e4
      // (2.2e-12) on top of 8 eps of the loss (float64 measured 1.9e-13).
      expect_close(host_values(loss), {want_loss}, 8 * eps() + 0x1.0p-52 * 1e4);
      expect_close(host_values(grad), want_grad, 8 * eps());
      const std::vector<double> got = host_values(grad), logit = host_values(target_logit);
      for (const std::size_t r : {std::size_t{1}, std::size_t{2}}) {
        EXPECT_EQ(logit[r], 0.0) << "row " << r;
        for (std::size_t v = 0; v < kVocab; ++v)
          EXPECT_EQ(got[r * kVocab + v], 0.0) << "row " << r << " column " << v;
      }
    }
  }
}

// Every target ignored and divisor 0 (the op layers' default when nothing counts): loss 0 and a
// zero gradient, exactly, never 0 / 0; the statistics stay finite, on the whole vocabulary and on
// a slice starting at column 17 (an ignored target lies in no slice). A divisor of 0 zeroes the
// loss and gradient of counted rows too (the kernels' rule; the op layers never pass it then).
TEST_P(LossKernelTest, AllTargetsIgnoredGiveZeroLossAndGradient) {
  CrossEntropyCase c = make_case();
  const Buffer counted = make_indices(c.targets, DType::i64);
  c.targets.assign(kRows, kIgnoreTarget);
  const Buffer logits = make(c.logits), targets = make_indices(c.targets, DType::i32);
  Buffer max = empty(kRows), sum_exp = empty(kRows), target_logit = empty(kRows);
  row_max(logits, kVocab, kVocab, max);
  for (const std::size_t first : {std::size_t{0}, std::size_t{17}}) {
    const std::size_t width = kVocab - first;
    const Buffer slice = make(columns(c.logits, first, width));
    cross_entropy_stats(slice, width, width, targets, static_cast<std::int64_t>(first), max,
                        sum_exp, target_logit);
    for (const double value : host_values(sum_exp))
      EXPECT_TRUE(std::isfinite(value)) << "column " << first;
    for (const double value : host_values(target_logit))
      EXPECT_EQ(value, 0.0) << "column " << first;
  }
  cross_entropy_stats(logits, kVocab, kVocab, targets, 0, max, sum_exp, target_logit);
  for (const Buffer* rows : {&targets, &counted}) {
    Buffer loss = make({1.0}), grad = make(std::vector<double>(c.logits.size(), 1.0));
    cross_entropy_loss(max, sum_exp, target_logit, *rows, 0.0, loss);
    cross_entropy_backward(logits, kVocab, kVocab, *rows, 0, max, sum_exp, make({0.7}), 0.0, grad);
    EXPECT_EQ(host_values(loss), std::vector<double>{0.0});
    for (const double value : host_values(grad))
      EXPECT_EQ(value, 0.0);
  }
}

TEST_P(LossKernelTest, AdamWMatchesTorchOrderOverThreeSteps) {
  constexpr std::size_t n = 257;
  constexpr double lr = 1e-2, beta1 = 0.9, beta2 = 0.95, adam_eps = 1e-8, wd = 0.1;
  std::vector<double> p = random(n, 53), m(n, 0.0), v(n, 0.0);
  Buffer param = make(p), exp_avg = make(m), exp_avg_sq = make(v);
  for (std::int64_t step = 1; step <= 3; ++step) {
    const std::vector<double> g = random(n, 54 + static_cast<unsigned>(step));
    const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    for (std::size_t i = 0; i < n; ++i) {  // torch.optim.AdamW, PyTorch 1.13, single tensor
      p[i] *= 1.0 - lr * wd;
      m[i] = m[i] * beta1 + (1.0 - beta1) * g[i];
      v[i] = v[i] * beta2 + (1.0 - beta2) * g[i] * g[i];
      const double denom = std::sqrt(v[i]) / std::sqrt(bc2) + adam_eps;
      p[i] -= lr / bc1 * m[i] / denom;
    }
    adamw_update(param, make(g), exp_avg, exp_avg_sq, lr, beta1, beta2, adam_eps, wd, step);
  }
  // Each step rounds ~10 times per element; three steps, values O(1): 32 eps.
  expect_close(host_values(param), p, 32 * eps());
  expect_close(host_values(exp_avg), m, 32 * eps());
  expect_close(host_values(exp_avg_sq), v, 32 * eps());
}

TEST_P(LossKernelTest, SumSquaresAccumulatesInDouble) {
  const std::vector<double> x = random(1001, 57);
  double want = 0.0;
  for (double value : x)
    want += value * value;
  Buffer out = empty(1);
  sum_squares(make(x), out);
  // Relative: float32 is one rounding of the double sum; float64 adds in other order than this
  // loop (8 interleaved accumulators), within Higham's bound (n / 8 + 3) u for n positive terms.
  const double order = (1001.0 / 8 + 3) * std::numeric_limits<double>::epsilon() / 2;
  expect_close(host_values(out), {want}, std::max(2 * eps(), order));
}

}  // namespace
}  // namespace mpitron::test
